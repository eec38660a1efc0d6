-- Drops the outputs of jobs finished longer ago than p_age, on both sides; how many (up to
-- p_limit on each side).
create or replace function fairqueue.trim_outputs_unchecked(
    p_age interval,
    p_limit integer
) returns bigint
language sql set search_path = pg_catalog, pg_temp
as $$
-- A finished job whose output waits for its result stays in fairqueue.jobs until then; every
-- other finished job has moved to finished_jobs long before its output is a day old.
with trimmed_here as (
    update fairqueue.jobs set output = null
     where status = 'done'
       and id in (select id from fairqueue.jobs
                   where output is not null and result_at is null and status = 'done'
                     and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
),
trimmed_moved as (
    update fairqueue.finished_jobs set output = null
     where finished_at < now() - p_age
       and id in (select id from fairqueue.finished_jobs
                   where output is not null and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
)
select (select count(*) from trimmed_here) + (select count(*) from trimmed_moved)
$$;

alter function fairqueue.trim_outputs_unchecked(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.trim_outputs_unchecked(interval, integer) from public,
    fairqueue_app;

-- The door: checks the arguments, then runs trim_outputs_unchecked as the owner. An output
-- waiting for its result is what the result is rendered from, by its client or, after the
-- grace, by the backstop: so it is kept two hours at least, twice the longest grace the result
-- doors take (sql/functions/results.sql), and a trim never outruns the backstop's rescue.
create or replace function fairqueue.trim_outputs(p_age interval, p_limit integer) returns bigint
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('trim_outputs: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.trim_outputs_unchecked(
    fairqueue.door_duration('trim_outputs', 'the age', p_age, interval '2 hours',
                            interval '3660 days'),
    p_limit);
$$;

alter function fairqueue.trim_outputs(interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.trim_outputs(interval, integer) from public, fairqueue_app;
grant execute on function fairqueue.trim_outputs(interval, integer) to fairqueue_app;
