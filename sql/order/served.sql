-- The served counts: how many jobs of each type each group was served in the last day, kept by
-- the triggers on jobs (sql/order/jobs_served.sql) and expired by expire_served. The same rows
-- carry each group's standing in the claim's order: its head, when its next job comes due, its
-- plan and whether it is paused.
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

-- Takes the edge lock only when a change reaches back to within an hour of the edge, and says
-- whether it did. PL/pgSQL: the triggers run once per statement, the batch functions make one
-- statement per tenant, and a SQL helper was planned again at every call.
create or replace function fairqueue.served_near_edge(oldest timestamp with time zone)
returns boolean
language plpgsql
as $$
begin
    if oldest < now() - interval '23 hours' then
        perform fairqueue.served_edge_lock();
        return true;
    end if;
    return false;
end $$;
alter function fairqueue.served_near_edge(timestamp with time zone) owner to fairqueue_owner;
revoke all on function fairqueue.served_near_edge(timestamp with time zone) from public,
    fairqueue_app;
grant execute on function fairqueue.served_near_edge(timestamp with time zone) to fairqueue_app;

-- Moves the watermark to a day ago and takes what crossed it out of the counts. Returns false
-- when another transaction holds the edge lock; the caller then reads counts that
-- are at most that transaction's length stale.
create or replace function fairqueue.expire_served() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
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
    -- Served jobs are done or running. The running ones are read through the lease index, all
    -- of them (the jobs in flight), so that no claim's row version enters an index of served
    -- times: jobs_running_leased puts each of them in it.
    insert into fairqueue.served as s (type, group_key, n, quantum)
    select e.type, e.group_key, -sum(e.counted), fairqueue.standing_quantum(e.type, '')
      from (select j.type, j.group_key, j.counted
              from fairqueue.jobs j
             where j.status = 'done' and j.served_at > wm and j.served_at <= target
            union all
            select j.type, j.group_key, j.counted
              from fairqueue.jobs j
             where j.lease_until is not null and j.status = 'running'
               and j.served_at > wm and j.served_at <= target
            union all
            select f.type, f.group_key, f.counted
              from fairqueue.finished_jobs f
             where f.served_at > wm and f.served_at <= target) e
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    update fairqueue.served_watermark set watermark = target;
    return true;
end $$;
alter function fairqueue.expire_served() owner to fairqueue_owner;
revoke all on function fairqueue.expire_served() from public, fairqueue_app;
grant execute on function fairqueue.expire_served() to fairqueue_app;

-- The expiry, skipped while the edge is less than a second stale: what every caller runs (before
-- each claim, and in the sweeper), so a busy queue moves the edge at most once a second.
create or replace function fairqueue.expire_served_when_stale() returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    if (select w.watermark from fairqueue.served_watermark w)
       < now() - interval '1 day 1 second' then
        perform fairqueue.expire_served();
    end if;
end $$;
alter function fairqueue.expire_served_when_stale() owner to fairqueue_owner;
revoke all on function fairqueue.expire_served_when_stale() from public, fairqueue_app;
grant execute on function fairqueue.expire_served_when_stale() to fairqueue_app;

-- A group's head: its oldest due pending job of the type, the job the group offers first. The
-- one definition of it, for the triggers that keep the head and the claim that repairs it.
-- Read from a job on when one is given (a head known to lie at or before the group's first due
-- job, see recompute_heads): the group's jobs claimed since the last vacuum keep their entries
-- in the index before it, and reading past them is most of a head's cost in a long drain.
-- A set of at most one row, so that the planner inlines it where it is read.
create or replace function fairqueue.group_head(p_type text, p_group_key text,
    p_from_created_at timestamp with time zone default '-infinity',
    p_from_id uuid default '00000000-0000-0000-0000-000000000000')
returns table (created_at timestamp with time zone, id uuid)
language sql stable rows 1
as $$
select j.created_at, j.id
  from fairqueue.jobs j
 where j.type = p_type and j.group_key = p_group_key and j.status = 'pending'
   and j.run_after <= now()
   and (j.created_at, j.id) >= (p_from_created_at, p_from_id)
 order by j.type, j.group_key, j.created_at, j.id
 limit 1
$$;
alter function fairqueue.group_head(text, text, timestamp with time zone, uuid)
    owner to fairqueue_owner;
revoke all on function fairqueue.group_head(text, text, timestamp with time zone, uuid)
    from public, fairqueue_app;

-- When the group's next pending job that is not due yet comes due; null when there is none.
create or replace function fairqueue.group_wake(p_type text, p_group_key text)
returns timestamp with time zone
language sql stable
as $$
select min(j.run_after)
  from fairqueue.jobs j
 where j.type = p_type and j.group_key = p_group_key and j.status = 'pending'
   and j.run_after > now()
$$;
alter function fairqueue.group_wake(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.group_wake(text, text) from public, fairqueue_app;

-- Adds each (type, group key) row's count change, compares in its wake time and sets its head
-- again from the jobs themselves, in one write per row: after a statement took due pending jobs
-- away from the groups, or as part of setting a whole standing again. The caller holds the rows
-- locked, so a fresh snapshot sees every change by a transaction that held them before. The
-- rows are found by primary key and written by their place, one statement for all of them: a
-- served table never analyzed must not be read whole.
--
-- An enqueue whose job is later than the head it reads writes nothing and holds the row key
-- share (served_apply), and a head read by a snapshot that cannot see that job yet may be set
-- past it. So each row is first tried for update, which finds such a holder without waiting
-- for it. Taken, the lock makes every later enqueue into the group wait for this transaction
-- and then compare its job with the head written here, and the read that follows, in a
-- statement of its own, sees every enqueue that held the row before: the head it sets lies at or
-- before every due job of the group that is or will be committed, which head_is_floor records.
-- The next head is then read from that one on, past none of the group's claimed jobs. A row
-- another transaction holds is read from the group's start and its head is not a floor; one
-- left without a head is looked at again by the next claim (its wake time is now), once that
-- transaction is over. A head taken for update that is read empty may still miss a job whose
-- enqueue began after this transaction (now() is when it began), and so is not due by its
-- clock: the group wakes when that job is due.
create or replace function fairqueue.recompute_heads(p_types text[], p_group_keys text[],
    p_n_deltas bigint[], p_head_created_ats timestamp with time zone[], p_head_ids uuid[],
    p_wake_ats timestamp with time zone[])
returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
declare
    places tid[];
    deltas bigint[];
    head_ats timestamptz[];
    head_ids uuid[];
    wakes timestamptz[];
    sole tid[];
    headless tid[];
    headless_sole tid[];
begin
    select array_agg(f.ctid order by k.place), array_agg(k.n_delta order by k.place),
           array_agg(k.head_created_at order by k.place), array_agg(k.head_id order by k.place),
           array_agg(k.wake_at order by k.place)
      into places, deltas, head_ats, head_ids, wakes
      from unnest(p_types, p_group_keys, p_n_deltas, p_head_created_ats, p_head_ids, p_wake_ats)
           with ordinality as k (type, group_key, n_delta, head_created_at, head_id, wake_at, place)
      cross join lateral (
          select r.ctid
            from fairqueue.served r
           where r.type = k.type and r.group_key = k.group_key
           limit 1) f;
    sole := array(select s.ctid
                    from fairqueue.served s
                   where s.ctid = any(places)
                     for update skip locked);
    with headed as (
        update fairqueue.served s
           set n = s.n + k.n_delta,
               wake_at = least(s.wake_at, k.wake_at),
               -- Read from the floor, or from a job the statement brought that is earlier.
               (head_created_at, head_id) = (
                   select h.created_at, h.id
                     from (select s.head_is_floor and s.head_id is not null
                                  and s.ctid = any(sole) as known,
                                  k.head_id is not null
                                  and (k.head_created_at, k.head_id)
                                      < (s.head_created_at, s.head_id) as brought) f
                    cross join lateral fairqueue.group_head(s.type, s.group_key,
                        case when not f.known then '-infinity'
                             when f.brought then k.head_created_at
                             else s.head_created_at end,
                        case when not f.known then '00000000-0000-0000-0000-000000000000'
                             when f.brought then k.head_id
                             else s.head_id end) h),
               head_is_floor = s.ctid = any(sole)
          from unnest(places, deltas, head_ats, head_ids, wakes)
               as k (place, n_delta, head_created_at, head_id, wake_at)
         where s.ctid = k.place
        returning s.ctid, s.head_id, s.head_is_floor
    )
    select array_agg(h.ctid) filter (where h.head_id is null and not h.head_is_floor),
           array_agg(h.ctid) filter (where h.head_id is null and h.head_is_floor)
      into headless, headless_sole
      from headed h;
    if headless is not null then
        update fairqueue.served s set wake_at = now() where s.ctid = any(headless);
    end if;
    if headless_sole is not null then
        update fairqueue.served s
           set wake_at = least(s.wake_at, fairqueue.group_wake(s.type, s.group_key))
         where s.ctid = any(headless_sole);
    end if;
end $$;
alter function fairqueue.recompute_heads(text[], text[], bigint[], timestamp with time zone[],
    uuid[], timestamp with time zone[]) owner to fairqueue_owner;
revoke all on function fairqueue.recompute_heads(text[], text[], bigint[],
    timestamp with time zone[], uuid[], timestamp with time zone[]) from public, fairqueue_app;

-- Sets the whole standing of these rows from the jobs, the tenant and the group: wake time, plan
-- (and its quantum) and pause, then the head. For groups whose jobs came due, and for a standing
-- the claim found wrong. The caller holds the rows locked.
create or replace function fairqueue.recompute_standings(p_types text[], p_group_keys text[])
returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    update fairqueue.served s
       set wake_at = fairqueue.group_wake(s.type, s.group_key),
           head_is_floor = false,
           paused = exists (select 1 from fairqueue.groups g
                             where g.key = s.group_key and g.status = 'paused'),
           (plan, quantum) = (select p.plan, fairqueue.standing_quantum(s.type, p.plan)
                                from (select coalesce((select t.plan from fairqueue.tenants t
                                                        where t.id = s.tenant_id), '') as plan) p)
     where s.ctid = any(array(
               select f.ctid
                 from unnest(p_types, p_group_keys) as k (type, group_key)
                 cross join lateral (
                     select r.ctid
                       from fairqueue.served r
                      where r.type = k.type and r.group_key = k.group_key
                      limit 1) f));
    perform fairqueue.recompute_heads(p_types, p_group_keys,
        array_fill(0::bigint, array[cardinality(p_types)]),
        array_fill(null::timestamptz, array[cardinality(p_types)]),
        array_fill(null::uuid, array[cardinality(p_types)]),
        array_fill(null::timestamptz, array[cardinality(p_types)]));
end $$;
alter function fairqueue.recompute_standings(text[], text[]) owner to fairqueue_owner;
revoke all on function fairqueue.recompute_standings(text[], text[]) from public, fairqueue_app;

-- Sets again the standings of the type's groups whose not-yet-due jobs have come due, from their
-- jobs: the first thing a claim does, at either level. At most 1,000 a claim, passing over those
-- another claim is setting.
create or replace function fairqueue.stand_woken_groups(p_type text) returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
declare
    woken text[];
begin
    select array_agg(w.group_key) into woken
      from (select s.group_key
              from fairqueue.served s
             where s.type = p_type and s.wake_at <= now()
             order by s.wake_at
             limit 1000
               for update skip locked) w;
    if woken is not null then
        perform fairqueue.recompute_standings(array_fill(p_type, array[cardinality(woken)]),
                                              woken);
    end if;
end $$;
alter function fairqueue.stand_woken_groups(text) owner to fairqueue_owner;
revoke all on function fairqueue.stand_woken_groups(text) from public, fairqueue_app;
