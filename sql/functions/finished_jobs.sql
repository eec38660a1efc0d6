-- The move of finished jobs out of the hot table (sql/migrations/0022_finished_jobs.sql).
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
-- (sql/order/jobs_served.sql). So the move writes no served row, and no claim waits for it.
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
        returning j
    )
    select count(*) into moved
      from fairqueue.keep_finished((select array_agg(g.j) from gone g), false);
    return moved;
end $$;
alter function fairqueue.move_finished_unchecked(integer, interval)
    owner to fairqueue_owner;
revoke all on function fairqueue.move_finished_unchecked(integer, interval)
    from public, fairqueue_app;

-- Writes jobs just deleted from fairqueue.jobs into finished_jobs, each in the day it finished on,
-- and returns their ids: the one list of what a finished job keeps. With p_done_now they are a
-- completion's, deleted while running and written done as of now, with no lease, error or
-- output (mark_claimed_done_unchecked); without, they are written as they were
-- (move_finished_unchecked). The caller has made the days they go to.
create or replace function fairqueue.keep_finished(p_rows fairqueue.jobs[], p_done_now boolean)
returns table (id uuid)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
begin
    return query
    insert into fairqueue.finished_jobs as f
           (id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
            run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
            finished_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
            release_tries, release_failing_since, output, result_at, cost, counted)
    select r.id, r.type, r.payload, r.tenant_id, r.group_id, r.dedupe_key,
           case when p_done_now then 'done' else r.status end, r.attempts, r.max_attempts,
           r.run_after, r.locked_at, case when p_done_now then null else r.lease_until end,
           r.locked_by, case when p_done_now then null else r.last_error end, r.run_id,
           r.created_at,
           case when p_done_now then now()
                else fairqueue.finished_time(r.finished_at, r.locked_at, r.created_at) end,
           r.rung_at, r.lane, r.delta_of, r.credit_cost, r.upstream_id, r.released_at,
           r.release_tries, r.release_failing_since,
           case when p_done_now then null else r.output end, r.result_at, r.cost, r.counted
      from unnest(p_rows) as r
    returning f.id;
end $$;
alter function fairqueue.keep_finished(fairqueue.jobs[], boolean) owner to fairqueue_owner;
revoke all on function fairqueue.keep_finished(fairqueue.jobs[], boolean)
    from public, fairqueue_app;

-- Whether the day of finished_jobs that a job finishing now goes to has been made.
create or replace function fairqueue.finishing_day_made() returns boolean
language sql stable set search_path = pg_catalog, pg_temp
as $$
select to_regclass(format('fairqueue.%I',
           fairqueue.day_partition_name((now() at time zone 'UTC')::date))) is not null
$$;
alter function fairqueue.finishing_day_made() owner to fairqueue_owner;
revoke all on function fairqueue.finishing_day_made() from public, fairqueue_app;

-- The rows in finished_jobs of these jobs, among the days from p_earliest's to today's (or
-- p_latest's, when later): where the delete trigger on jobs finds the jobs its statement moved.
-- One probe of each day's id index for all of them, where a probe per job paid for choosing the
-- day again at every job. Sequential scans are off: the plan is made once per connection, and a
-- day still empty when it is made would be read whole ever after.
create or replace function fairqueue.finished_rows_of(p_ids uuid[],
    p_earliest timestamp with time zone, p_latest timestamp with time zone)
returns table (id uuid, finished_at timestamp with time zone, served_at timestamp with time zone,
    counted integer)
language plpgsql stable set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan set enable_seqscan = off
as $$
#variable_conflict use_column
begin
    return query
        select f.id, f.finished_at, f.served_at, f.counted
          from fairqueue.finished_jobs f
         where f.finished_at between p_earliest and greatest(now(), p_latest)
           and f.id = any(p_ids);
end $$;
alter function fairqueue.finished_rows_of(uuid[], timestamp with time zone,
    timestamp with time zone) owner to fairqueue_owner;
revoke all on function fairqueue.finished_rows_of(uuid[], timestamp with time zone,
    timestamp with time zone) from public, fairqueue_app;

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

-- The door: checks the arguments, then runs move_finished_unchecked as the owner. The lock wait
-- is a millisecond at least: lock_timeout counts whole milliseconds, and 0 would wait for ever.
create or replace function fairqueue.move_finished(p_limit integer, p_lock_wait interval)
returns bigint
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('move_finished: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.move_finished_unchecked(p_limit,
    fairqueue.door_duration('move_finished', 'the lock wait', p_lock_wait,
                            interval '1 millisecond', interval '10 seconds'));
$$;
alter function fairqueue.move_finished(integer, interval) owner to fairqueue_owner;
revoke all on function fairqueue.move_finished(integer, interval)
    from public, fairqueue_app;
grant execute on function fairqueue.move_finished(integer, interval) to fairqueue_app;
