-- What `fairqueue status` prints: each type's jobs by state, across every tenant. Counts only.
create or replace function fairqueue.queue_status() returns table (
    type text, queued bigint, backlog bigint, scheduled bigint, running bigint, stuck bigint,
    failed bigint, done bigint)
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
  from fairqueue.all_jobs
 group by type
 order by type
$$;

alter function fairqueue.queue_status() owner to fairqueue_owner;
revoke all on function fairqueue.queue_status() from public, fairqueue_app;
grant execute on function fairqueue.queue_status() to fairqueue_app;

-- How many jobs are open (queued, running, or pending and due within p_due_within; null: any
-- pending job), across every tenant: the local loop's "is anything left" check. A count only.
create or replace function fairqueue.open_jobs_unchecked(p_due_within interval) returns bigint
language sql stable set search_path = pg_catalog, pg_temp
as $$
select count(*)
  from fairqueue.jobs
 where status in ('queued', 'running')
    or (status = 'pending' and (p_due_within is null or run_after <= now() + p_due_within))
$$;

alter function fairqueue.open_jobs_unchecked(interval) owner to fairqueue_owner;
revoke all on function fairqueue.open_jobs_unchecked(interval) from public, fairqueue_app;

-- The door: a window given is 0 to 3,660 days, then open_jobs_unchecked runs as the owner.
create or replace function fairqueue.open_jobs(p_due_within interval) returns bigint
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.open_jobs_unchecked(
    case when p_due_within is not null
         then fairqueue.door_duration('open_jobs', 'the window', p_due_within, interval '0',
                                      interval '3660 days') end)
$$;

alter function fairqueue.open_jobs(interval) owner to fairqueue_owner;
revoke all on function fairqueue.open_jobs(interval) from public, fairqueue_app;
grant execute on function fairqueue.open_jobs(interval) to fairqueue_app;
