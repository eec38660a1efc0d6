-- Served-in-the-last-day per (type, group), kept O(groups) for the claim.
--
-- served.n counts the jobs whose served_at is newer than the watermark. A trigger applies every
-- change to jobs as it happens; expire_served() moves the watermark up to now() - 1 day and
-- subtracts what it passed. Rows changed near the window's edge take a shared advisory lock that
-- the expiry takes exclusively, so the two never count one row differently.

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

create function fairqueue.jobs_served_trigger() returns trigger
language plpgsql as $$
declare
    wm timestamptz;
    old_counts boolean := false;
    new_counts boolean := false;
    edge timestamptz := now() - interval '23 hours';
begin
    if tg_op in ('UPDATE', 'DELETE') and old.served_at is not null then
        if old.served_at < edge then perform fairqueue.served_edge_lock(); end if;
    end if;
    if tg_op in ('INSERT', 'UPDATE') and new.served_at is not null then
        if new.served_at < edge then perform fairqueue.served_edge_lock(); end if;
    end if;
    select watermark into wm from fairqueue.served_watermark;
    if tg_op in ('UPDATE', 'DELETE') then
        old_counts := old.served_at is not null and old.served_at > wm;
    end if;
    if tg_op in ('INSERT', 'UPDATE') then
        new_counts := new.served_at is not null and new.served_at > wm;
    end if;
    if old_counts and new_counts and old.type = new.type
       and coalesce(old.group_id, '') = coalesce(new.group_id, '') then
        return null;
    end if;
    if old_counts then
        update fairqueue.served set n = n - 1
         where type = old.type and group_key = coalesce(old.group_id, '');
    end if;
    if new_counts then
        insert into fairqueue.served as s (type, group_key, n)
        values (new.type, coalesce(new.group_id, ''), 1)
        on conflict (type, group_key) do update set n = s.n + 1;
    end if;
    return null;
end $$;

create trigger jobs_served after insert or update of status, finished_at, locked_at, type, group_id
    or delete on fairqueue.jobs
    for each row execute function fairqueue.jobs_served_trigger();

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
    update fairqueue.served s set n = s.n - gone.n
      from (select type, coalesce(group_id, '') as group_key, count(*) as n
              from fairqueue.jobs
             where served_at > wm and served_at <= target
             group by 1, 2) gone
     where s.type = gone.type and s.group_key = gone.group_key;
    update fairqueue.served_watermark set watermark = target;
    return true;
end $$;
