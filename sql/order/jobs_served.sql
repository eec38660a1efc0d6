-- The served rows follow every change to jobs: statement-level triggers that add what became served
-- in the last day and take away what stopped being so, per type and group key, each job by the
-- units it counts (`counted`: 1, its cost when claimed by cost, or what it spent), and keep each
-- group's standing in the claim's order (sql/migrations/0019_standings.sql): a job that becomes due
-- and pending can only move the head earlier, so it is compared in; a statement that takes the
-- head's job (or any due pending job) away locks the row, then sets the head again from the jobs in
-- a statement of its own, whose fresh snapshot sees whoever held the row before. Rows are locked in
-- key order, so overlapping statements never deadlock on them. They run as the owner (security
-- definer): only these triggers and the claim write served, whoever changed jobs.

-- Applies one statement's changes, aggregated per (type, group key): n_delta to the count, a
-- candidate head and wake time compared in; departed says the statement took due pending jobs
-- away, so the caller sets the head again next. A group whose standing already has an older head
-- and a wake time no later, with nothing counted or taken away (the common enqueue into a group
-- with work), is only locked key share: claims and other writers of the row never wait for that
-- lock, and concurrent enqueuers into one group share it. Every other row named is upserted and
-- so locked (no key update) for the caller, in key order.
--
-- The key share lock is taken first and the standing read after it, in a statement of its own.
-- A claim that sets a group's head again takes its row for update when no enqueue holds it
-- (recompute_heads): an enqueue that locks after that waits for the claim, and the fresh read
-- sees the head the claim set. One that locked before keeps the claim from taking the row for
-- update, and the head the claim sets is then not relied on as a floor by the next one.
--
-- A group whose due pending jobs the statement took away (departed) gets its head again from
-- the jobs: its standing, locked with the other rows to write, is written once with its count,
-- wake time and head together (recompute_heads), read from the earlier of its floor and the
-- statement's own earliest arrival, in a statement whose fresh snapshot sees whoever held the
-- row before. One with no standing yet is upserted first, then given its head the same way.
create or replace function fairqueue.served_apply(p_types text[], p_group_keys text[],
    p_tenant_ids text[], p_n_deltas bigint[], p_head_created_ats timestamp with time zone[],
    p_head_ids uuid[], p_wake_ats timestamp with time zone[], p_departed boolean[])
returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
declare
    unchanged boolean[];
    standing boolean[];
    gone record;
begin
    perform 1
       from unnest(p_types, p_group_keys, p_n_deltas, p_departed)
            as c (type, group_key, n_delta, departed)
       cross join lateral (
           select 1
             from fairqueue.served s
            where c.n_delta = 0 and not c.departed
              and s.type = c.type and s.group_key = c.group_key
              for key share of s) k;
    select array_agg(k.held is not null order by c.place) into unchanged
      from unnest(p_types, p_group_keys, p_n_deltas, p_head_created_ats, p_head_ids, p_wake_ats,
                  p_departed) with ordinality
           as c (type, group_key, n_delta, head_created_at, head_id, wake_at, departed, place)
      left join lateral (
          select true as held
            from fairqueue.served s
           where c.n_delta = 0 and not c.departed
             and s.type = c.type and s.group_key = c.group_key and s.head_id is not null
             and (c.head_id is null
                  or (s.head_created_at, s.head_id) < (c.head_created_at, c.head_id))
             and (c.wake_at is null or s.wake_at <= c.wake_at)
           limit 1) k on true;
    if true = all(unchanged) then
        return;
    end if;
    -- Every row the statement writes that exists is locked first, in key order, so that the
    -- writes below wait only for rows another transaction is inserting.
    select array_agg(c.departed and k.found is not null order by c.place) into standing
      from unnest(p_types, p_group_keys, p_departed, unchanged) with ordinality
           as c (type, group_key, departed, unchanged, place)
      left join lateral (
          select true as found
            from fairqueue.served s
           where not c.unchanged and s.type = c.type and s.group_key = c.group_key
           limit 1
             for no key update of s) k on true;
    unchanged := array(select u.unchanged or u.standing
                         from unnest(unchanged, standing) as u (unchanged, standing));
    if false = any(unchanged) then
        insert into fairqueue.served as s (type, group_key, n, tenant_id, plan, paused,
                                           head_created_at, head_id, wake_at, quantum)
        select c.type, c.group_key, c.n_delta, c.tenant_id, coalesce(t.plan, ''),
               coalesce(g.status = 'paused', false), c.head_created_at, c.head_id, c.wake_at,
               fairqueue.standing_quantum(c.type, coalesce(t.plan, ''))
          from unnest(p_types, p_group_keys, p_tenant_ids, p_n_deltas, p_head_created_ats,
                      p_head_ids, p_wake_ats, unchanged)
               as c (type, group_key, tenant_id, n_delta, head_created_at, head_id, wake_at,
                     unchanged)
          left join fairqueue.tenants t on t.id = c.tenant_id
          left join fairqueue.groups g on g.key = c.group_key
         where not c.unchanged
         order by c.type, c.group_key
        on conflict (type, group_key) do update
           set n = s.n + excluded.n,
               tenant_id = coalesce(excluded.tenant_id, s.tenant_id),
               head_created_at = case when excluded.head_id is not null
                                       and (s.head_id is null
                                            or (excluded.head_created_at, excluded.head_id)
                                               < (s.head_created_at, s.head_id))
                                      then excluded.head_created_at else s.head_created_at end,
               head_id = case when excluded.head_id is not null
                               and (s.head_id is null
                                    or (excluded.head_created_at, excluded.head_id)
                                       < (s.head_created_at, s.head_id))
                              then excluded.head_id else s.head_id end,
               wake_at = least(s.wake_at, excluded.wake_at)
         where excluded.n <> 0
            or (excluded.head_id is not null
                and (s.head_id is null
                     or (excluded.head_created_at, excluded.head_id)
                        < (s.head_created_at, s.head_id)))
            or (excluded.wake_at is not null
                and (s.wake_at is null or excluded.wake_at < s.wake_at));
    end if;
    select array_agg(c.type order by c.place) as types,
           array_agg(c.group_key order by c.place) as keys,
           array_agg(case when c.standing then c.n_delta else 0 end order by c.place) as deltas,
           array_agg(c.head_created_at order by c.place) as head_ats,
           array_agg(c.head_id order by c.place) as head_ids,
           array_agg(case when c.standing then c.wake_at end order by c.place) as wakes
      into gone
      from unnest(p_types, p_group_keys, p_n_deltas, p_head_created_ats, p_head_ids, p_wake_ats,
                  p_departed, standing)
           with ordinality as c (type, group_key, n_delta, head_created_at, head_id, wake_at,
                                 departed, standing, place)
     where c.departed;
    if gone.types is not null then
        perform fairqueue.recompute_heads(gone.types, gone.keys, gone.deltas, gone.head_ats,
                                          gone.head_ids, gone.wakes);
    end if;
end $$;
alter function fairqueue.served_apply(text[], text[], text[], bigint[],
    timestamp with time zone[], uuid[], timestamp with time zone[], boolean[])
    owner to fairqueue_owner;
revoke all on function fairqueue.served_apply(text[], text[], text[], bigint[],
    timestamp with time zone[], uuid[], timestamp with time zone[], boolean[])
    from public, fairqueue_app;

create or replace function fairqueue.jobs_served_insert() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
declare
    c record;
begin
    perform fairqueue.served_near_edge((select min(served_at) from new_rows));
    select array_agg(a.type order by a.type, a.group_key) as types,
           array_agg(a.group_key order by a.type, a.group_key) as keys,
           array_agg(a.tenant_id order by a.type, a.group_key) as tenants,
           array_agg(a.n_delta order by a.type, a.group_key) as deltas,
           array_agg(a.head_created_at order by a.type, a.group_key) as head_ats,
           array_agg(a.head_id order by a.type, a.group_key) as head_ids,
           array_agg(a.wake_at order by a.type, a.group_key) as wakes
      into c
      from (select r.type, r.group_key, min(r.tenant_id) as tenant_id,
                   coalesce(sum(r.counted) filter (where r.served_at > w.watermark), 0)
                       as n_delta,
                   (array_agg(r.created_at order by r.created_at, r.id)
                        filter (where r.status = 'pending' and r.run_after <= now()))[1]
                       as head_created_at,
                   (array_agg(r.id order by r.created_at, r.id)
                        filter (where r.status = 'pending' and r.run_after <= now()))[1]
                       as head_id,
                   min(r.run_after) filter (where r.status = 'pending' and r.run_after > now())
                       as wake_at
              from new_rows r, fairqueue.served_watermark w
             where r.status = 'pending' or r.served_at > w.watermark
             group by 1, 2) a;
    if c.types is not null then
        perform fairqueue.served_apply(c.types, c.keys, c.tenants, c.deltas, c.head_ats,
                                       c.head_ids, c.wakes,
                                       array_fill(false, array[cardinality(c.types)]));
    end if;
    return null;
end $$;
alter function fairqueue.jobs_served_insert() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_insert() from public, fairqueue_app;

-- An update may count a job served or not, make it due and pending (a retry, a job given back, a
-- lane's next job) or take it away from the due pending ones (a claim, a cancel).
create or replace function fairqueue.jobs_served_update() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
declare
    c record;
    arrivals boolean;
    changed boolean;
    oldest timestamptz;
begin
    -- A statement that takes pending jobs away (a claim, a cancel) changes a standing whatever
    -- else it does: it only needs the edge lock when it reaches back near the edge, and the
    -- pass below that pairs old and new rows would tell nothing more.
    if exists (select 1 from old_rows o where o.status = 'pending') then
        perform fairqueue.served_near_edge(least((select min(o.served_at) from old_rows o),
                                                 (select min(n.served_at) from new_rows n)));
    else
        -- A statement that leaves no job pending and moves none across the day's edge (a
        -- batch's completion, a lease extended: by far the most common updates, one per tenant
        -- of a batch) changes no standing and no count. Told by one pass over the rows when no
        -- job it touched was served near the edge: such a job stays inside the day whatever the
        -- watermark, unless it gains or loses its served time. A full join can only be hashed
        -- or merged: the transition tables have no statistics, and a nested loop over a large
        -- statement's rows would be quadratic.
        select coalesce(bool_or(o.id is null or n.id is null or n.status = 'pending'
                                or n.type <> o.type or n.group_key <> o.group_key
                                or n.counted <> o.counted
                                or (o.served_at is null) <> (n.served_at is null)), false),
               least(min(o.served_at), min(n.served_at))
          into changed, oldest
          from old_rows o
          full join new_rows n on n.id = o.id;
        if not fairqueue.served_near_edge(oldest) and not changed then
            return null;
        end if;
    end if;
    -- Otherwise (a job pending, moved, or served near the edge, whose lock is now held): the
    -- same question asked of the watermark itself.
    if not exists (select 1 from old_rows o where o.status = 'pending')
       and not exists (select 1 from new_rows n where n.status = 'pending')
       and not exists (
           select 1
             from old_rows o
             full join new_rows n on n.id = o.id
            cross join fairqueue.served_watermark w
            where o.id is null or n.id is null
               or n.type <> o.type or n.group_key <> o.group_key
               or (n.counted <> o.counted and n.served_at > w.watermark)
               or (o.served_at > w.watermark) is distinct from (n.served_at > w.watermark)) then
        return null;
    end if;
    arrivals := exists (select 1 from new_rows n where n.status = 'pending');
    select array_agg(a.type order by a.type, a.group_key) as types,
           array_agg(a.group_key order by a.type, a.group_key) as keys,
           array_agg(a.tenant_id order by a.type, a.group_key) as tenants,
           array_agg(a.n_delta order by a.type, a.group_key) as deltas,
           array_agg(a.head_created_at order by a.type, a.group_key) as head_ats,
           array_agg(a.head_id order by a.type, a.group_key) as head_ids,
           array_agg(a.wake_at order by a.type, a.group_key) as wakes,
           array_agg(a.departed order by a.type, a.group_key) as departed
      into c
      from (-- A statement that leaves no job pending (a claim, a cancel) brings no job due and
            -- no head or wake time: each group's change is its count and whether a due pending
            -- job left it, one grouping of the rows with no window to pair a job's old row with
            -- its new one.
            select ch.type, ch.group_key, min(ch.tenant_id) as tenant_id,
                   coalesce(sum(ch.served), 0)::bigint as n_delta,
                   null::timestamptz as head_created_at, null::uuid as head_id,
                   null::timestamptz as wake_at, bool_or(ch.departed) as departed
              from (select o.type, o.group_key, o.tenant_id,
                           case when o.served_at > w.watermark then -o.counted end as served,
                           o.status = 'pending' and o.run_after <= now() as departed
                      from old_rows o, fairqueue.served_watermark w
                     where not arrivals
                    union all
                    select n.type, n.group_key, n.tenant_id,
                           case when n.served_at > w.watermark then n.counted end, false
                      from new_rows n, fairqueue.served_watermark w
                     where not arrivals) ch
             group by 1, 2
            having coalesce(sum(ch.served), 0) <> 0 or bool_or(ch.departed)
            union all
            select ch.type, ch.group_key, min(ch.tenant_id) as tenant_id,
                   coalesce(sum(ch.served), 0)::bigint as n_delta,
                   (array_agg(ch.created_at order by ch.created_at, ch.id)
                        filter (where ch.arrived))[1] as head_created_at,
                   (array_agg(ch.id order by ch.created_at, ch.id)
                        filter (where ch.arrived))[1] as head_id,
                   min(ch.wake_at) as wake_at,
                   bool_or(ch.departed) as departed
              from (select v.type, v.group_key, v.tenant_id, v.id, v.created_at, v.served,
                           v.is_new and v.due and not bool_or(not v.is_new and v.due)
                               over (partition by v.id, v.type, v.group_key, v.created_at)
                               as arrived,
                           case when v.is_new and v.pending and not v.due then v.run_after end
                               as wake_at,
                           not v.is_new and v.due and not bool_or(v.is_new and v.due)
                               over (partition by v.id, v.type, v.group_key, v.created_at)
                               as departed
                      from (select o.type, o.group_key, o.tenant_id, o.id, o.created_at,
                                   o.run_after, false as is_new, o.status = 'pending' as pending,
                                   o.status = 'pending' and o.run_after <= now() as due,
                                   case when o.served_at > w.watermark then -o.counted end
                                       as served
                              from old_rows o, fairqueue.served_watermark w
                             where arrivals
                            union all
                            select n.type, n.group_key, n.tenant_id, n.id, n.created_at,
                                   n.run_after, true, n.status = 'pending',
                                   n.status = 'pending' and n.run_after <= now(),
                                   case when n.served_at > w.watermark then n.counted end
                              from new_rows n, fairqueue.served_watermark w
                             where arrivals) v) ch
             group by 1, 2
            having coalesce(sum(ch.served), 0) <> 0 or bool_or(ch.arrived)
                or bool_or(ch.departed) or min(ch.wake_at) is not null) a;
    if c.types is not null then
        perform fairqueue.served_apply(c.types, c.keys, c.tenants, c.deltas, c.head_ats,
                                       c.head_ids, c.wakes, c.departed);
    end if;
    return null;
end $$;
alter function fairqueue.jobs_served_update() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_update() from public, fairqueue_app;

-- A job deleted from fairqueue.jobs takes its count with it, unless it moved to
-- fairqueue.finished_jobs in the same statement (the backstop's move, or a completion that moves
-- its jobs as it marks them done): there it counts by its served_at on that side, which a
-- completion sets to now. The deleted jobs are looked for by id among the days from the
-- earliest one they would have finished on to today, all at once (finished_rows_of): one day,
-- but for a statement with a job that ran across midnight. A job is in one table or the other,
-- never both (a retry takes it back out of finished_jobs), so its id finds only its move.
create or replace function fairqueue.jobs_served_delete() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
declare
    c record;
    deleted uuid[];
    earliest timestamptz;
    latest timestamptz;
begin
    perform fairqueue.served_near_edge((select min(served_at) from old_rows));
    select array_agg(r.id),
           min(fairqueue.finished_time(r.finished_at, r.locked_at, r.created_at)),
           max(fairqueue.finished_time(r.finished_at, r.locked_at, r.created_at))
      into deleted, earliest, latest
      from old_rows r;
    select array_agg(a.type order by a.type, a.group_key) as types,
           array_agg(a.group_key order by a.type, a.group_key) as keys,
           array_agg(a.n_delta order by a.type, a.group_key) as deltas,
           array_agg(a.departed order by a.type, a.group_key) as departed
      into c
      from (select r.type, r.group_key,
                   sum(case when m.served_at > w.watermark then m.counted else 0 end
                       - case when r.served_at > w.watermark then r.counted else 0 end)
                       as n_delta,
                   bool_or(r.status = 'pending' and r.run_after <= now()) as departed
              from old_rows r
             cross join fairqueue.served_watermark w
              left join fairqueue.finished_rows_of(deleted, earliest, latest) m on m.id = r.id
             group by 1, 2) a
     where a.n_delta <> 0 or a.departed;
    if c.types is not null then
        perform fairqueue.served_apply(c.types, c.keys,
            array_fill(null::text, array[cardinality(c.types)]), c.deltas,
            array_fill(null::timestamptz, array[cardinality(c.types)]),
            array_fill(null::uuid, array[cardinality(c.types)]),
            array_fill(null::timestamptz, array[cardinality(c.types)]), c.departed);
    end if;
    return null;
end $$;
alter function fairqueue.jobs_served_delete() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_delete() from public, fairqueue_app;


create or replace trigger jobs_served_insert after insert on fairqueue.jobs
    referencing new table as new_rows
    for each statement execute function fairqueue.jobs_served_insert();
create or replace trigger jobs_served_update after update on fairqueue.jobs
    referencing old table as old_rows new table as new_rows
    for each statement execute function fairqueue.jobs_served_update();
create or replace trigger jobs_served_delete after delete on fairqueue.jobs
    referencing old table as old_rows
    for each statement execute function fairqueue.jobs_served_delete();
