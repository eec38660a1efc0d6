-- A group's head is set again for all the groups of a statement at once, and the watch for an
-- enqueue still open on a headless group is part of that (sql/functions/served.sql).
drop function if exists fairqueue.watch_headless(text, text);
