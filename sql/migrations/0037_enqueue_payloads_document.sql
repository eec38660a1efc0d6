-- fairqueue.enqueue_jobs takes the payloads of an enqueue_many call as one JSON array, where it
-- took an array of texts: its earlier form is dropped here and defined again with the rest of
-- sql/functions/enqueue.sql after the migrations.
drop function if exists fairqueue.enqueue_jobs(text, text, text[], text[], text[], integer[],
    timestamp with time zone[], float8[]);

-- Each session takes the values of job_id_order a thousand at a time, in a cache of its own, so
-- drawing a job's id no longer locks and writes the sequence's shared page for every job.
alter sequence fairqueue.job_id_order cache 1000;
