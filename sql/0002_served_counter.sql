-- Served-in-the-last-day per (type, group), kept O(groups) for the claim.
--
-- served.n counts the jobs whose served_at is newer than the watermark. A trigger applies every
-- change to jobs as it happens; expire_served() moves the watermark up to now() - 1 day and
-- subtracts what it passed. Statements that change rows near the window's edge take a shared
-- advisory lock that the expiry takes exclusively, so the two never count one row differently.

create table fairqueue.served (
    type      text not null,
    group_key text not null,
    n         bigint not null default 0,
    primary key (type, group_key)
);

create table fairqueue.served_watermark (
    singleton boolean primary key default true check (singleton),
    watermark timestamptz not null
);

insert into fairqueue.served_watermark (watermark) values (now() - interval '1 day');

create function fairqueue.served_edge_lock() returns void
language sql as $$ select pg_advisory_xact_lock_shared(hashtextextended('fairqueue.served', 0)) $$;

-- Statement-level triggers see every row a statement changed at once, so each applies its
-- net change per (type, group) in one INSERT ... ORDER BY: concurrent claims touching the same
-- groups lock counter rows in the same order and cannot deadlock.

create function fairqueue.served_near_edge(oldest timestamptz) returns void
language sql as $$
    select fairqueue.served_edge_lock() where oldest < now() - interval '23 hours'
$$;

create function fairqueue.jobs_served_insert() returns trigger
language plpgsql as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from new_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, coalesce(group_id, ''), count(*)
      from new_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create function fairqueue.jobs_served_update() returns trigger
language plpgsql as $$
begin
    perform fairqueue.served_near_edge(
        least((select min(served_at) from old_rows), (select min(served_at) from new_rows)));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, sum(d)
      from (select type, coalesce(group_id, '') as group_key, -1 as d, served_at from old_rows
            union all
            select type, coalesce(group_id, ''), 1, served_at from new_rows) as changed
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
    having sum(d) <> 0
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create function fairqueue.jobs_served_delete() returns trigger
language plpgsql as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from old_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, coalesce(group_id, ''), -count(*)
      from old_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create trigger jobs_served_insert after insert on fairqueue.jobs
    referencing new table as new_rows
    for each statement execute function fairqueue.jobs_served_insert();

create trigger jobs_served_update after update on fairqueue.jobs
    referencing old table as old_rows new table as new_rows
    for each statement execute function fairqueue.jobs_served_update();

create trigger jobs_served_delete after delete on fairqueue.jobs
    referencing old table as old_rows
    for each statement execute function fairqueue.jobs_served_delete();

-- Returns false when another transaction holds the edge lock; the caller then reads counts that
-- are at most that transaction's length stale.
create function fairqueue.expire_served() returns boolean
language plpgsql as $$
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
    select type, coalesce(group_id, ''), -count(*)
      from fairqueue.jobs
     where served_at > wm and served_at <= target
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    update fairqueue.served_watermark set watermark = target;
    return true;
end $$;
