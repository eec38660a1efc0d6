-- The days of fairqueue.finished_jobs (sql/migrations/0022_finished_jobs.sql): one partition per
-- UTC day of finished_at, made ahead of need and dropped whole once retention has passed its last
-- instant. Making or dropping a day takes an exclusive lock on finished_jobs, which every reader of
-- finished jobs and the move queue behind while it waits: so each such step waits at most a short
-- lock timeout and is left for the next call when busy. The days are made a week ahead, so a busy
-- minute costs nothing. The open work in fairqueue.jobs never waits for any of it.

-- The name of the partition of finished_jobs that holds p_day's jobs (in schema fairqueue).
create or replace function fairqueue.day_partition_name(p_day date) returns text
language sql immutable parallel safe
as $$
select format('finished_jobs_%s', to_char(p_day, 'YYYYMMDD'))
$$;
alter function fairqueue.day_partition_name(date) owner to fairqueue_owner;
revoke all on function fairqueue.day_partition_name(date) from public, fairqueue_app;

-- The partition of finished_jobs that holds p_day's jobs, with the indexes of the table; the
-- caller guards it (fairqueue.guard_jobs_table, sql/policies/jobs.sql). False when it exists
-- already.
create or replace function fairqueue.add_day_partition(p_day date) returns boolean
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    name text := fairqueue.day_partition_name(p_day);
    lower timestamptz := p_day::timestamp at time zone 'UTC';
begin
    if to_regclass(format('fairqueue.%I', name)) is not null then
        return false;
    end if;
    execute format('create table fairqueue.%I partition of fairqueue.finished_jobs'
                   ' for values from (%L) to (%L)', name, lower, lower + interval '1 day');
    return true;
end $$;
alter function fairqueue.add_day_partition(date) owner to fairqueue_owner;
revoke all on function fairqueue.add_day_partition(date) from public, fairqueue_app;

-- add_day_partition, the new day guarded as every partition of finished_jobs is. The caller
-- sets how long it may wait for the lock (lock_not_available when it cannot have it).
create or replace function fairqueue.add_guarded_day(p_day date) returns boolean
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    if not fairqueue.add_day_partition(p_day) then
        return false;
    end if;
    perform fairqueue.guard_jobs_table(
        format('fairqueue.%I', fairqueue.day_partition_name(p_day))::regclass);
    return true;
end $$;
alter function fairqueue.add_guarded_day(date) owner to fairqueue_owner;
revoke all on function fairqueue.add_guarded_day(date) from public, fairqueue_app;

-- The days of finished_jobs, each with the instant its range ends.
create or replace function fairqueue.finished_partitions()
returns table (partition regclass, ends_at timestamp with time zone)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select c.oid::regclass,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \(''([^'']+)''\)'))[1]::timestamptz
  from pg_inherits i
  join pg_class c on c.oid = i.inhrelid
 where i.inhparent = 'fairqueue.finished_jobs'::regclass
$$;
alter function fairqueue.finished_partitions() owner to fairqueue_owner;
revoke all on function fairqueue.finished_partitions() from public, fairqueue_app;

-- Makes the day partitions from today (UTC) through p_ahead days on, and drops the finished
-- partitions whose every job finished longer ago than p_keep. Each step waits for its locks at
-- most p_lock_wait and is skipped when it could not have them. Returns what it made, dropped
-- and skipped.
create or replace function fairqueue.keep_partitions_unchecked(p_keep interval,
    p_ahead integer, p_lock_wait interval)
returns table (made integer, dropped integer, skipped integer)
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    today date := (now() at time zone 'UTC')::date;
    day date;
    old record;
    lock_wait_was text := current_setting('lock_timeout');
begin
    made := 0;
    dropped := 0;
    skipped := 0;
    perform set_config('lock_timeout', (extract(epoch from p_lock_wait) * 1000)::bigint::text,
                       true);
    for day in select d::date from generate_series(today, today + p_ahead, interval '1 day') d loop
        begin
            if fairqueue.add_guarded_day(day) then
                made := made + 1;
            end if;
        exception when lock_not_available then
            skipped := skipped + 1;
        end;
    end loop;
    for old in select p.partition from fairqueue.finished_partitions() p
                where p.ends_at <= now() - p_keep
                order by p.ends_at loop
        begin
            execute format('drop table %s', old.partition);
            dropped := dropped + 1;
        exception when lock_not_available then
            skipped := skipped + 1;
        end;
    end loop;
    perform set_config('lock_timeout', lock_wait_was, true);
    return next;
end $$;
alter function fairqueue.keep_partitions_unchecked(interval, integer, interval)
    owner to fairqueue_owner;
revoke all on function fairqueue.keep_partitions_unchecked(interval, integer, interval)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs keep_partitions_unchecked as the owner. Finished
-- jobs are kept a day at least and ten years at most; the lock wait is a millisecond at least,
-- since lock_timeout counts whole milliseconds and 0 would wait for ever.
create or replace function fairqueue.keep_partitions(p_keep interval, p_ahead integer,
    p_lock_wait interval)
returns table (made integer, dropped integer, skipped integer)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_ahead between 1 and 60,
    format('keep_partitions: days ahead must be from 1 to 60, got %s', p_ahead));
select * from fairqueue.keep_partitions_unchecked(
    fairqueue.door_duration('keep_partitions', 'the keep', p_keep, interval '1 day',
                            interval '3660 days'),
    p_ahead,
    fairqueue.door_duration('keep_partitions', 'the lock wait', p_lock_wait,
                            interval '1 millisecond', interval '10 seconds'));
$$;
alter function fairqueue.keep_partitions(interval, integer, interval) owner to fairqueue_owner;
revoke all on function fairqueue.keep_partitions(interval, integer, interval)
    from public, fairqueue_app;
grant execute on function fairqueue.keep_partitions(interval, integer, interval)
    to fairqueue_app;
