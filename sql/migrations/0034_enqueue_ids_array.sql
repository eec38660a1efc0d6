-- fairqueue.enqueue_jobs answers one row whose ids are the items' ids in order, where it
-- answered a row per item: its earlier form is dropped here and defined again with the rest of
-- sql/functions/enqueue.sql after the migrations.
drop function if exists fairqueue.enqueue_jobs(text, text, text[], text[], text[], integer[],
    timestamp with time zone[], float8[]);
