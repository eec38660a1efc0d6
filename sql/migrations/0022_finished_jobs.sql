-- Finished jobs leave the hot table. fairqueue.jobs keeps the open work (queued, pending,
-- running) and, for a short while, the jobs that just finished; the backstop moves finished
-- jobs in bounded batches to fairqueue.finished_jobs (fairqueue.move_finished,
-- sql/functions/finished_jobs.sql), a table partitioned by the UTC day of finished_at whose days
-- are made ahead and dropped whole (fairqueue.keep_partitions, sql/functions/partitions.sql). A
-- done job whose output still waits for its result stays until the result is decided. The
-- move is also the upgrade: on a database in use the finished jobs already in fairqueue.jobs
-- leave it the same way, a batch at a time, while the queue goes on.
--
-- fairqueue.all_jobs is the one view of both, for whoever reads a job whatever its state; it
-- runs with the reader's rights, so the tenant policies of both tables hold through it.
-- requires: functions/partitions.sql

create table fairqueue.finished_jobs (
    id                    uuid not null,
    type                  text not null,
    payload               jsonb not null,
    tenant_id             text,
    group_id              text,
    dedupe_key            text,
    status                text not null
                          constraint finished_jobs_status_check
                          check (status in ('done', 'failed', 'cancelled')),
    attempts              integer not null,
    max_attempts          integer not null,
    run_after             timestamptz not null,
    locked_at             timestamptz,
    lease_until           timestamptz,
    locked_by             text,
    last_error            text,
    run_id                uuid,
    created_at            timestamptz not null,
    -- Which day's partition holds the job.
    finished_at           timestamptz not null,
    -- As in fairqueue.jobs: the served counts expire what turns a day old on both sides.
    served_at             timestamptz generated always as (
                              case when status in ('done', 'running')
                                   then coalesce(finished_at, locked_at) end
                          ) stored,
    rung_at               timestamptz,
    lane                  text,
    delta_of              uuid,
    credit_cost           bigint not null,
    upstream_id           text,
    released_at           timestamptz,
    release_tries         integer not null,
    release_failing_since timestamptz,
    output                jsonb,
    result_at             timestamptz,
    group_key             text not null
                          generated always as (fairqueue.group_key(tenant_id, group_id)) stored
) partition by range (finished_at);
alter table fairqueue.finished_jobs owner to fairqueue_owner;

-- A job by id, wherever its day is.
create index finished_jobs_id_idx on fairqueue.finished_jobs (id);
-- Served history by time, for the expiry of the served counts.
create index finished_jobs_served_at_idx on fairqueue.finished_jobs (served_at)
    where served_at is not null;
-- Finished jobs that still carry an output, oldest first, for its retention.
create index finished_jobs_output_idx on fairqueue.finished_jobs (finished_at)
    where output is not null;

-- The finished jobs the move takes, oldest first: all but the done ones whose output waits for
-- its result (those are found by jobs_missing_result_idx).
drop index fairqueue.jobs_finished_idx;
create index jobs_movable_idx on fairqueue.jobs (finished_at)
    where status in ('done', 'failed', 'cancelled')
      and not (status = 'done' and output is not null and result_at is null);

-- The days around today; the backstop keeps the next ones made, and the move makes any
-- earlier day it meets.
do $$
declare
    today date := (now() at time zone 'UTC')::date;
    day date;
begin
    for day in select d::date from generate_series(today - 7, today + 7, interval '1 day') d loop
        perform fairqueue.add_day_partition(day);
    end loop;
end $$;

create view fairqueue.all_jobs with (security_invoker = true) as
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
       finished_at, served_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
       release_tries, release_failing_since, output, result_at, group_key
  from fairqueue.jobs
union all
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
       finished_at, served_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
       release_tries, release_failing_since, output, result_at, group_key
  from fairqueue.finished_jobs;
alter view fairqueue.all_jobs owner to fairqueue_owner;

-- Retention moves and drops whole days now (fairqueue.move_finished, fairqueue.keep_partitions);
-- the door that deleted rows one by one goes.
drop function if exists fairqueue.prune_jobs(interval, integer);
drop function if exists fairqueue.prune_jobs_unchecked(interval, integer);
