-- Held upstream work for admitted jobs.
--
-- A job of a stage with an upstream records the id of its held work at admission. The work is
-- released (started) by the claim that first runs the job. A failed release is not an attempt:
-- it is counted in release_tries and retried with backoff until a window measured from
-- release_failing_since has passed, then the job fails.

alter table fairqueue.jobs add column upstream_id text;
alter table fairqueue.jobs add column released_at timestamptz;
alter table fairqueue.jobs add column release_tries integer not null default 0
    check (release_tries >= 0);
alter table fairqueue.jobs add column release_failing_since timestamptz;

-- The status door gains the lanes' waiting work: queued jobs are open work too.
drop function if exists fairqueue.queue_status();
