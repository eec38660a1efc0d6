-- The move of finished jobs out of the hot table (sql/0022_finished_jobs.sql).
--
-- Up to p_limit finished jobs leave fairqueue.jobs for fairqueue.finished_jobs, oldest first,
-- in one statement that deletes them on one side and inserts them on the other. A done job
-- whose output has no result yet stays until its result is decided or its output trimmed:
-- every writer of results finds it where it was, whichever process runs the move and whatever
-- stages it knows. A row another transaction holds is left for the next call. The day a job
-- finished on is made first when it is missing (an earlier day, or a job dated by hand); a day
-- whose lock cannot be had within p_lock_wait keeps its jobs for the next call. How many moved.
--
-- The served counts do not change: a finished job counts, or not, by the same served_at on
-- either side, and the trigger on fairqueue.jobs leaves finished jobs that leave it alone
-- (sql/triggers/jobs_served.sql). So the move writes no served row, and no claim waits for it.
create or replace function fairqueue.move_finished_unchecked(p_limit integer,
    p_lock_wait interval)
returns bigint
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
declare
    picked uuid[];
    day date;
    moved bigint;
    lock_wait_was text := current_setting('lock_timeout');
begin
    picked := array(
        select j.id
          from fairqueue.jobs j
         where j.status in ('done', 'failed', 'cancelled')
           and not (j.status = 'done' and j.output is not null and j.result_at is null)
           and not j.give_up_owed
         order by j.finished_at
         limit p_limit
           for update skip locked);
    if cardinality(picked) = 0 then
        return 0;
    end if;
    perform set_config('lock_timeout', (extract(epoch from p_lock_wait) * 1000)::bigint::text,
                       true);
    for day in select distinct fairqueue.finished_day(j.finished_at, j.locked_at, j.created_at)
                 from fairqueue.jobs j
                where j.id = any(picked) loop
        begin
            perform fairqueue.add_guarded_day(day);
        exception when lock_not_available then
            picked := array(
                select j.id
                  from fairqueue.jobs j
                 where j.id = any(picked)
                   and fairqueue.finished_day(j.finished_at, j.locked_at, j.created_at) <> day);
        end;
    end loop;
    perform set_config('lock_timeout', lock_wait_was, true);
    with gone as (
        delete from fairqueue.jobs j
         where j.id = any(picked)
        returning j.*
    )
    insert into fairqueue.finished_jobs
           (id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
            run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
            finished_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
            release_tries, release_failing_since, output, result_at)
    select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
           run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
           fairqueue.finished_time(finished_at, locked_at, created_at), rung_at, lane, delta_of,
           credit_cost,
           upstream_id, released_at, release_tries, release_failing_since, output, result_at
      from gone;
    get diagnostics moved = row_count;
    return moved;
end $$;
alter function fairqueue.move_finished_unchecked(integer, interval)
    owner to fairqueue_owner;
revoke all on function fairqueue.move_finished_unchecked(integer, interval)
    from public, fairqueue_app;

-- When a finished job finished, as finished_jobs records it: its finish time, or, for a job
-- finished by hand with none, when it was last taken or made.
create or replace function fairqueue.finished_time(p_finished_at timestamp with time zone,
    p_locked_at timestamp with time zone, p_created_at timestamp with time zone)
returns timestamp with time zone
language sql immutable parallel safe
as $$
select coalesce(p_finished_at, p_locked_at, p_created_at)
$$;
alter function fairqueue.finished_time(timestamp with time zone, timestamp with time zone,
    timestamp with time zone) owner to fairqueue_owner;
revoke all on function fairqueue.finished_time(timestamp with time zone, timestamp with time zone,
    timestamp with time zone) from public, fairqueue_app;

-- The UTC day, and so the partition, a finished job belongs to.
create or replace function fairqueue.finished_day(p_finished_at timestamp with time zone,
    p_locked_at timestamp with time zone, p_created_at timestamp with time zone)
returns date
language sql immutable parallel safe
as $$
select (fairqueue.finished_time(p_finished_at, p_locked_at, p_created_at) at time zone 'UTC')::date
$$;
alter function fairqueue.finished_day(timestamp with time zone, timestamp with time zone,
    timestamp with time zone) owner to fairqueue_owner;
revoke all on function fairqueue.finished_day(timestamp with time zone, timestamp with time zone,
    timestamp with time zone) from public, fairqueue_app;

-- The door: checks the arguments, then runs move_finished_unchecked as the owner.
create or replace function fairqueue.move_finished(p_limit integer, p_lock_wait interval)
returns bigint
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('move_finished: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.door_argument(p_lock_wait > interval '0' and p_lock_wait <= interval '10 seconds',
    format('move_finished: the lock wait must be above 0 and at most 10 seconds, got %s',
           p_lock_wait));
select fairqueue.move_finished_unchecked(p_limit, p_lock_wait);
$$;
alter function fairqueue.move_finished(integer, interval) owner to fairqueue_owner;
revoke all on function fairqueue.move_finished(integer, interval)
    from public, fairqueue_app;
grant execute on function fairqueue.move_finished(integer, interval) to fairqueue_app;
