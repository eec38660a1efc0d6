-- Drops the outputs of jobs finished longer ago than p_age; how many.
create or replace function fairqueue.trim_outputs_unchecked(
    p_age interval,
    p_limit integer
) returns bigint
language sql set search_path = pg_catalog, pg_temp
as $$
with trimmed as (
    update fairqueue.jobs set output = null
     where id in (select id from fairqueue.jobs
                   where output is not null and status in ('done', 'failed', 'cancelled')
                     and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
)
select count(*) from trimmed
$$;

alter function fairqueue.trim_outputs_unchecked(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.trim_outputs_unchecked(interval, integer) from public,
    fairqueue_app;

-- The door: checks the arguments, then runs trim_outputs_unchecked as the owner.
create or replace function fairqueue.trim_outputs(p_age interval, p_limit integer) returns bigint
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_age > interval '0',
    format('trim_outputs: the age must be positive, got %s', p_age));
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('trim_outputs: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.trim_outputs_unchecked(p_age, p_limit);
$$;

alter function fairqueue.trim_outputs(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.trim_outputs(interval, integer) from public, fairqueue_app;
grant execute on function fairqueue.trim_outputs(interval, integer) to fairqueue_app;

-- Deletes jobs finished longer ago than p_age; how many.
create or replace function fairqueue.prune_jobs_unchecked(
    p_age interval,
    p_limit integer
) returns bigint
language sql set search_path = pg_catalog, pg_temp
as $$
with pruned as (
    delete from fairqueue.jobs
     where id in (select id from fairqueue.jobs
                   where status in ('done', 'failed', 'cancelled')
                     and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
)
select count(*) from pruned
$$;

alter function fairqueue.prune_jobs_unchecked(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.prune_jobs_unchecked(interval, integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs prune_jobs_unchecked as the owner.
create or replace function fairqueue.prune_jobs(p_age interval, p_limit integer) returns bigint
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_age > interval '0',
    format('prune_jobs: the age must be positive, got %s', p_age));
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('prune_jobs: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.prune_jobs_unchecked(p_age, p_limit);
$$;

alter function fairqueue.prune_jobs(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.prune_jobs(interval, integer) from public, fairqueue_app;
grant execute on function fairqueue.prune_jobs(interval, integer) to fairqueue_app;
