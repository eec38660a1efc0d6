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
drop function fairqueue.queue_status();
create function fairqueue.queue_status()
returns table (type text, queued bigint, backlog bigint, scheduled bigint, running bigint,
               stuck bigint, failed bigint, done bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select type,
       count(*) filter (where status = 'queued'),
       count(*) filter (where status = 'pending' and run_after <= now()),
       count(*) filter (where status = 'pending' and run_after > now()),
       count(*) filter (where status = 'running' and lease_until >= now()),
       count(*) filter (where status = 'running' and lease_until < now()),
       count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'done')
  from fairqueue.jobs
 group by type
 order by type
$$;
alter function fairqueue.queue_status() owner to fairqueue_owner;
revoke execute on function fairqueue.queue_status() from public;
grant execute on function fairqueue.queue_status() to fairqueue_app;
