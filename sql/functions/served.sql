-- The served counts: how many jobs of each type each group was served in the last day, kept by
-- the triggers on jobs (sql/triggers/jobs_served.sql) and expired by expire_served.
--
-- A change to jobs served near the one-day edge takes this lock shared, so it cannot interleave
-- with expire_served, which takes it exclusively while it moves the watermark.
create or replace function fairqueue.served_edge_lock() returns void
language sql
as $$
 select pg_advisory_xact_lock_shared(hashtextextended('fairqueue.served', 0))
$$;

alter function fairqueue.served_edge_lock() owner to fairqueue_owner;
revoke all on function fairqueue.served_edge_lock() from public, fairqueue_app;
grant execute on function fairqueue.served_edge_lock() to fairqueue_app;

-- Takes the edge lock only when a change reaches back to within an hour of the edge. PL/pgSQL:
-- the triggers run once per statement, the batch functions make one statement per tenant, and a
-- SQL helper was planned again at every call.
create or replace function fairqueue.served_near_edge(oldest timestamp with time zone) returns void
language plpgsql
as $$
begin
    if oldest < now() - interval '23 hours' then
        perform fairqueue.served_edge_lock();
    end if;
end $$;
alter function fairqueue.served_near_edge(timestamp with time zone) owner to fairqueue_owner;
revoke all on function fairqueue.served_near_edge(timestamp with time zone) from public,
    fairqueue_app;
grant execute on function fairqueue.served_near_edge(timestamp with time zone) to fairqueue_app;

-- Moves the watermark to a day ago and takes what crossed it out of the counts. Returns false
-- when another transaction holds the edge lock; the caller then reads counts that
-- are at most that transaction's length stale.
create or replace function fairqueue.expire_served() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    wm timestamptz;
    target timestamptz := now() - interval '1 day';
begin
    if not pg_try_advisory_xact_lock(hashtextextended('fairqueue.served', 0)) then
        return false;
    end if;
    select watermark into wm from fairqueue.served_watermark for update;
    if wm >= target then
        return true;
    end if;
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, -count(*)
      from fairqueue.jobs
     where served_at > wm and served_at <= target
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    update fairqueue.served_watermark set watermark = target;
    return true;
end $$;
alter function fairqueue.expire_served() owner to fairqueue_owner;
revoke all on function fairqueue.expire_served() from public, fairqueue_app;
grant execute on function fairqueue.expire_served() to fairqueue_app;
