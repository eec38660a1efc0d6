-- A group's standing is written once by a statement that took its due pending jobs away (count,
-- wake time and head together), for all the statement's groups at once, and the watch for an
-- enqueue still open on a headless group is part of that (sql/order/served.sql).
drop function if exists fairqueue.watch_headless(text, text);
drop function if exists fairqueue.recompute_heads(text[], text[]);
