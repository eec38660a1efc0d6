-- The first jobs of each of the best groups that offer one, for the claim below: the groups come
-- from the standing index (sql/migrations/0048_quantum.sql), best first, plan by plan, and each
-- offers its oldest due jobs that no one else holds (skip locked), as many as are left of its
-- current quantum (its standing's quantum less its served count's remainder: one with a quantum
-- of 1). With p_by_cost each job counts its cost: a group offers its jobs while the costs of
-- those before them leave some of the quantum (the first always), which is its run. The groups
-- are read until their quanta's jobs fill the batch, so a batch over many groups holds about
-- batch / quantum standings, not one per job. With p_hold_groups the
-- claim also locks each group's standing (skip locked), so concurrent claimers take different
-- groups and never wait for one another; a group another claimer holds, or whose due jobs are
-- all held, is passed over and the claim reads further down the index. Without it (when every
-- group with work is held) it takes the jobs nobody holds in held groups, and waits for their
-- standings when it writes them: it holds no standing itself, so that wait cannot close a
-- circle. Each first job comes as a fairqueue.ranked_job
-- (sql/migrations/0044_order_definitions_folded.sql), with what the claim ranks it by (its
-- group's served count, plan and quantum) read where it was found, so the claim looks up none
-- of them again;
-- in the order the jobs were taken.
--
-- A capped tenant (p_plan_caps, p_default_cap: sql/order/caps.sql) gives no more first jobs, over
-- all its groups, than its room (tenant_rooms, asked once per tenant, the first time a pass meets
-- it), the first ones in the order's order; the rest are passed over, so the claim reads further
-- down the index for groups that can give. Without p_hold_groups it waits for a tenant another
-- claimer is claiming for, as it waits for standings.
create or replace function fairqueue.claim_firsts(
    p_type text,
    p_batch integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_hold_groups boolean,
    p_plan_caps integer[],
    p_default_cap integer,
    p_by_cost boolean
) returns fairqueue.ranked_job[]
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
#variable_conflict use_column
declare
    level record;
    candidates text[];
    -- How many standings a pass read from the index.
    seen integer;
    -- How many jobs a group is expected to give: its quantum's rest at first, then at most what
    -- the groups of the last pass gave on average, so that groups with fewer jobs than a
    -- quantum (one each, over many groups) are read in two passes, not batch / quantum.
    expect integer := p_batch;
    last_level bigint;
    last_at timestamptz;
    last_id uuid;
    need integer;
    -- The standings of the candidates a pass holds, each with its group's head as its job.
    heads fairqueue.ranked_job[];
    -- The first jobs a pass found from those heads, and all the passes took.
    found_jobs fairqueue.ranked_job[];
    taken fairqueue.ranked_job[] := '{}';
    stale text[];
    -- The capped tenants met so far, and how many more first jobs each may give.
    capped constant boolean := fairqueue.any_cap(p_plan_caps, p_default_cap);
    room_keys text[] := '{}';
    rooms integer[] := '{}';
    -- The groups whose jobs a pass reads before it locks any: a capped tenant's, or all of
    -- them when counted by cost.
    read_first text[] := '{}';
    read_jobs fairqueue.ranked_job[];
begin
    -- The plans with standing groups, found by a skip scan, ranked into priority levels; within
    -- a level the plans' index orders are merged.
    for level in
        with recursive present (plan) as (
            (select s.plan from fairqueue.served s
              where s.type = p_type and s.head_id is not null and not s.paused
              order by s.plan limit 1)
            union all
            select (select s.plan from fairqueue.served s
                     where s.type = p_type and s.head_id is not null and not s.paused
                       and s.plan > p.plan
                     order by s.plan limit 1)
              from present p
             where p.plan is not null
        )
        select fairqueue.plan_priority(p.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority) as priority,
               array_agg(p.plan) as plans
          from present p
         where p.plan is not null
         group by 1
         order by 1 desc
    loop
        last_level := -9223372036854775808;
        last_at := '-infinity';
        last_id := '00000000-0000-0000-0000-000000000000';
        loop
            need := p_batch - cardinality(taken);
            exit when need <= 0;
            -- The best standings by whole quanta served, then head, as many as the batch could
            -- need if each gave one job; of them, those whose quanta's jobs are still short of
            -- the batch when the ones before them have given theirs.
            select array_agg(c.group_key order by c.level, c.head_created_at, c.head_id)
                       filter (where c.before < need),
                   (array_agg(c.level order by c.level desc, c.head_created_at desc,
                              c.head_id desc) filter (where c.before < need))[1],
                   (array_agg(c.head_created_at order by c.level desc, c.head_created_at desc,
                              c.head_id desc) filter (where c.before < need))[1],
                   (array_agg(c.head_id order by c.level desc, c.head_created_at desc,
                              c.head_id desc) filter (where c.before < need))[1],
                   count(*)
              into candidates, last_level, last_at, last_id, seen
              from (select x.group_key, x.level, x.head_created_at, x.head_id,
                           coalesce(sum(least(x.quantum - x.n % x.quantum, expect))
                                        over (order by x.level, x.head_created_at, x.head_id
                                              rows between unbounded preceding
                                                       and 1 preceding), 0) as before
                      from (select x.group_key, x.n, x.quantum, x.level, x.head_created_at,
                                   x.head_id
                              from unnest(level.plans) as l (plan)
                              cross join lateral (
                                  select s.group_key, s.n, s.quantum, s.n / s.quantum as level,
                                         s.head_created_at, s.head_id
                                    from fairqueue.served s
                                   where s.type = p_type and s.plan = l.plan
                                     and s.head_id is not null and not s.paused
                                     and (s.n / s.quantum, s.head_created_at, s.head_id)
                                         > (last_level, last_at, last_id)
                                   order by s.n / s.quantum, s.head_created_at, s.head_id
                                   limit need) x
                             order by x.level, x.head_created_at, x.head_id
                             limit need) x) c;
            exit when candidates is null;
            if p_hold_groups then
                select array_agg(row(h.group_key, h.n, h.plan, h.head_created_at, h.head_id,
                                     h.quantum, null)::fairqueue.ranked_job)
                  into heads
                  from unnest(candidates) as k (group_key)
                  cross join lateral (
                      select s.group_key, s.n, s.plan, s.head_created_at, s.head_id, s.quantum
                        from fairqueue.served s
                       where s.type = p_type and s.group_key = k.group_key
                         and not exists (select 1 from unnest(taken) t
                                          where t.group_key = k.group_key)
                         and s.head_id is not null and not s.paused
                         for no key update skip locked) h;
            else
                select array_agg(row(s.group_key, s.n, s.plan, s.head_created_at, s.head_id,
                                     s.quantum, null)::fairqueue.ranked_job)
                  into heads
                  from unnest(candidates) as k (group_key)
                  cross join lateral (
                      select s.group_key, s.n, s.plan, s.head_created_at, s.head_id, s.quantum
                        from fairqueue.served s
                       where s.type = p_type and s.group_key = k.group_key
                       limit 1) s;
            end if;
            -- The rooms of the capped tenants this pass meets first (tenant_rooms), and the
            -- groups of capped tenants, whose jobs are read below the others', so that no job
            -- past a tenant's room is locked: a job locked and not taken would be passed over
            -- by other claimers until this claim commits.
            if capped then
                select room_keys || coalesce(array_agg(r.tenant_key), '{}'),
                       rooms || coalesce(array_agg(r.room), '{}')
                  into room_keys, rooms
                  from (select coalesce(array_agg(fairqueue.group_tenant_key(k.group_key)),
                                        '{}') as keys,
                               coalesce(array_agg(k.plan), '{}') as plans
                          from unnest(heads) k
                         where fairqueue.group_tenant_key(k.group_key) <> all(room_keys)) met
                  cross join lateral fairqueue.tenant_rooms(
                           array_fill(p_type, array[cardinality(met.keys)]), met.keys,
                           met.plans, p_plan_names, p_plan_caps, p_default_cap,
                           not p_hold_groups) r;
                read_first := array(select k.group_key from unnest(heads) k
                                     where fairqueue.group_tenant_key(k.group_key)
                                           = any(room_keys));
            end if;
            -- Counted by cost, a group's run is known once its jobs' costs are read: every
            -- group's jobs are read first, and a job past the run is never locked (a job locked
            -- and not taken would be passed over by other claimers until this claim commits).
            if p_by_cost then
                read_first := array(select k.group_key from unnest(heads) k);
            end if;
            -- Each group's oldest due jobs that no one holds, from its head on, as many as are
            -- left of its quantum; a paused group offers none. The jobs before the head are
            -- gone, and the index keeps their entries until a vacuum: read from the start, a
            -- group drained of 50,000 jobs since the last vacuum costs 0.65 ms a read here
            -- instead of 0.05. A job before the head, which an enqueue holding the standing
            -- committed after a claim set the head without seeing it, is found by the next
            -- claim's head, which does not read from a head set so (recompute_heads).
            select array_agg(row(f.group_key, k.served, k.plan, f.created_at, f.id,
                                 k.quantum, f.cost)::fairqueue.ranked_job)
              into found_jobs
              from unnest(heads) as k
              cross join lateral (
                  select j.group_key, j.id, j.created_at, 1 as cost
                    from fairqueue.jobs j
                   where j.type = p_type and j.status = 'pending'
                     and j.group_key = k.group_key and j.run_after <= now()
                     and (j.created_at, j.id)
                         >= (coalesce(k.created_at, '-infinity'),
                             coalesce(k.id, '00000000-0000-0000-0000-000000000000'))
                     and not exists (select 1 from fairqueue.groups g
                                      where g.key = k.group_key and g.status = 'paused')
                   order by j.type, j.group_key, j.created_at, j.id
                   limit k.quantum - k.served % k.quantum
                     for update of j skip locked) f
             where k.group_key <> all(read_first);
            -- The groups read first: the same jobs read without a lock, cut to each group's run
            -- when counted by cost, of a capped tenant the first in the order's order (level,
            -- its run's first job, the job) as many as its room, and only those kept locked;
            -- a capped tenant's room left for the passes after this one.
            if cardinality(read_first) > 0 then
                select array_agg(row(c.group_key, c.served, c.plan, c.created_at, c.id,
                                     c.quantum, c.cost)::fairqueue.ranked_job)
                  into read_jobs
                  from (select c.*
                  from (select c.*,
                               row_number() over (partition by c.tenant_key
                                                  order by c.served / c.quantum,
                                                           c.run_created_at, c.run_id,
                                                           c.created_at, c.id) as nth
                          from (select f.group_key, k.served, k.plan, f.created_at, f.id,
                                       k.quantum, f.cost, fairqueue.group_tenant_key(k.group_key)
                                                      as tenant_key,
                                       first_value(f.created_at) over run as run_created_at,
                                       first_value(f.id) over run as run_id,
                                       sum(f.cost) over run - f.cost as before
                                  from unnest(heads) as k
                                  cross join lateral (
                                      select j.group_key, j.id, j.created_at,
                                             case when p_by_cost then j.cost else 1 end as cost
                                        from fairqueue.jobs j
                                       where j.type = p_type and j.status = 'pending'
                                         and j.group_key = k.group_key and j.run_after <= now()
                                         and (j.created_at, j.id)
                                             >= (coalesce(k.created_at, '-infinity'),
                                                 coalesce(k.id,
                                                          '00000000-0000-0000-0000-000000000000'))
                                         and not exists (select 1 from fairqueue.groups g
                                                          where g.key = k.group_key
                                                            and g.status = 'paused')
                                       order by j.type, j.group_key, j.created_at, j.id
                                       limit k.quantum - k.served % k.quantum) f
                                 where k.group_key = any(read_first)
                                window run as (partition by f.group_key
                                               order by f.created_at, f.id)) c
                         where c.before < c.quantum - c.served % c.quantum) c
                          left join unnest(room_keys, rooms) as r (tenant_key, room)
                                 on r.tenant_key = c.tenant_key
                         where c.nth <= coalesce(r.room, c.nth)
                        -- Kept apart: only the jobs within the run and the room are locked.
                        offset 0) c
                 where exists (select 1 from fairqueue.jobs j
                                where j.id = c.id and j.status = 'pending'
                                  and j.run_after <= now()
                                  for update of j skip locked);
                found_jobs := coalesce(found_jobs, '{}') || coalesce(read_jobs, '{}');
                select coalesce(array_agg(greatest(0, r.room - (
                                    select count(*) from unnest(read_jobs) c
                                     where fairqueue.group_tenant_key(c.group_key)
                                           = r.tenant_key)) order by r.i), '{}')
                  into rooms
                  from unnest(room_keys, rooms) with ordinality as r (tenant_key, room, i);
            end if;
            taken := taken || coalesce(found_jobs, '{}');
            if cardinality(heads) > 0 then
                expect := greatest(1, ceil(coalesce(cardinality(found_jobs), 0)::numeric
                                            / cardinality(heads)));
            end if;
            -- A group this claim holds that offered nothing although its head is not held
            -- either: its standing is wrong (its jobs changed in a way no trigger saw, such as a
            -- truncate, or it was paused since), so it stands again from its jobs.
            if p_hold_groups
               and cardinality(heads)
                   > (select count(distinct f.group_key) from unnest(found_jobs) f) then
                select array_agg(s.group_key) into stale
                  from unnest(heads) as k
                  cross join lateral (
                      select s.group_key, s.head_id
                        from fairqueue.served s
                       where s.type = p_type and s.group_key = k.group_key
                         and not exists (select 1 from unnest(found_jobs) f
                                          where f.group_key = k.group_key)
                       limit 1) s
                 where not exists (select 1 from fairqueue.jobs j
                                    where j.id = s.head_id and j.status = 'pending'
                                      and j.run_after <= now());
                if stale is not null then
                    perform fairqueue.recompute_standings(
                        array_fill(p_type, array[cardinality(stale)]), stale);
                end if;
            end if;
            -- The plans of this priority have no more standings once a pass read fewer than
            -- it asked for and kept them all.
            exit when seen < need and cardinality(candidates) = seen;
        end loop;
        exit when cardinality(taken) >= p_batch;
    end loop;
    return taken;
end $$;

alter function fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean,
    integer[], integer, boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean,
    integer[], integer, boolean) from public, fairqueue_app;

