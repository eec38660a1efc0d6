-- The dashboard's overview counts each type's jobs that failed in the last day, and a million
-- finished jobs are mostly done ones: the failed ones get an index of their own, by when they
-- finished and their type, so the count reads only them (sql/functions/dashboard.sql).
create index finished_jobs_failed_idx on fairqueue.finished_jobs (finished_at, type)
    where status = 'failed';
