-- The level at which queues whose first picks stand at the given served counts fill a batch,
-- if each had picks enough, for each set of queues (p_keys). A queue served c times with a
-- quantum of q stands at level c / q (whole quanta) and has q(x + 1) - c picks at levels up to
-- x: the rest of its current quantum and a whole quantum a level after it. The level is the
-- least x with sum(q(x + 1) - c) >= batch over the set's queues at levels at most x, found
-- between each level and the next. Each queue has its own quantum (p_quanta), so that plans'
-- shares, which are quanta in proportion to their weights, fill levels alike. Both claims offer
-- their top priority's queues only as deep as this level: the group claim its groups (one set),
-- the tenant claim its tenants and then each tenant's groups (a set a tenant). No SET clause, so
-- that the planner inlines it into the claims' statements (which run with the owner's search
-- path): called as a function of its own it cost 0.2-0.6 ms a claim.
create or replace function fairqueue.fill_levels(
    p_keys text[],
    p_batches bigint[],
    p_served bigint[],
    p_quanta integer[]
) returns table (key text, level bigint)
language sql immutable
as $$
select w.key, min(w.level)
  from (select c.key,
               greatest(c.level,
                        ceil((c.batch + c.served_up_to)::numeric / c.quanta_up_to)::bigint - 1)
                   as level,
               c.next_level
          from (select s.key, s.batch, s.level,
                       sum(s.quanta) over (partition by s.key order by s.level) as quanta_up_to,
                       sum(s.served) over (partition by s.key order by s.level) as served_up_to,
                       lead(s.level) over (partition by s.key order by s.level) as next_level
                  from (select u.key, max(u.batch) as batch, u.served / u.quantum as level,
                               sum(u.quantum) as quanta, sum(u.served) as served
                          from unnest(p_keys, p_batches, p_served, p_quanta)
                                   as u (key, batch, served, quantum)
                         group by u.key, u.served / u.quantum) s) c) w
 where w.next_level is null or w.level < w.next_level
 group by w.key
$$;

alter function fairqueue.fill_levels(text[], bigint[], bigint[], integer[])
    owner to fairqueue_owner;
revoke all on function fairqueue.fill_levels(text[], bigint[], bigint[], integer[])
    from public, fairqueue_app;

-- The picks of a claim: the best p_batch of the jobs the first groups offer, locked in the
-- order's order (claim_unchecked, sql/order/claim.sql). Each of those groups offers the first
-- jobs claim_firsts locked (the rest of its current quantum) and more of its oldest due jobs
-- after them; jobs whose lease expired before their last attempt join them.
--
-- A group's job k (its k-th from its first, from 0) stands at level (served + k) / quantum (its
-- standing's quantum); counted by cost (p_by_cost), at (served + the costs of its jobs before
-- it) / quantum. The jobs of one level of a group (a quantum's run) all stand at the
-- first of them, so a group at the top gives its whole quantum before the order is taken
-- again. Groups of plans with other weights have other quanta (Stage(order="shares")). The
-- order's key is
-- (priority, level, the run's first job, the job), the run's first job ranking the groups of a
-- level by their oldest due job at the moment their run starts. With a quantum of 1 every job is
-- a run of its own and the key is (priority, served + k, the job): the exact order.
--
-- The ids come in the order's order, with whether they are surely the batch: no group that was
-- allowed fewer jobs than it could take has its next job standing before the batch's last pick.
--
-- How many a group could take at all: its job k stands behind every group of a higher priority
-- and every group of its own at a lower level, and behind its own first k jobs. That bound
-- counts only the first jobs of the others, so a group a few others share the batch with is
-- allowed nearly all of it: ten groups of the top plan ahead of ninety others offered 2,700 jobs
-- for a batch of 100. So when p_tight is set, the groups of the top priority offer only as deep
-- as they would reach if each had jobs enough (fill_levels), one more for a pick another claimer
-- holds, and the groups below them their first jobs; the caller asks again without p_tight when
-- that is not surely the batch.
--
-- A group also offers at least a share of twice the batch when fewer groups' quanta than the
-- batch offer first jobs, so that a claimer that overlaps another in the same groups finds
-- spares.
--
-- A capped tenant (sql/order/caps.sql) has its room in p_rooms beside its key in p_room_keys:
-- of its jobs on offer only the first that many in the order's order are picked, and its other
-- groups' next jobs stand past them. Its first jobs are not counted as standing ahead of others
-- in the bounds (they may not be picked), and its groups do not set the water level. A group cut
-- short whose next job stands after its tenant's last job within its room could not be picked.
create or replace function fairqueue.claim_picks(
    p_type text,
    p_batch integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_firsts fairqueue.ranked_job[],
    p_tight boolean,
    p_room_keys text[],
    p_rooms integer[],
    p_by_cost boolean
) returns table (ids uuid[], verified boolean)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    return query
    -- The first jobs with their plans' priorities, which every step below ranks by, and each
    -- one's place in its group: the units of the group's jobs before it (k, its count when each
    -- job counts one).
    with firsts as (
        select f.id, f.created_at, f.group_key, f.served, f.quantum, f.cost,
               fairqueue.plan_priority(f.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority) as priority,
               sum(f.cost) over (partition by f.group_key order by f.created_at, f.id) - f.cost
                   as k
          from unnest(p_firsts) as f
    ),
    -- Each first group: its level, its first job, its last first job and how many it gave.
    groups as (
        select f.group_key, f.priority, f.served, f.quantum, f.served / f.quantum as level,
               count(*) as gave, sum(f.cost) as gave_units,
               (array_agg(f.created_at order by f.k))[1] as first_created_at,
               (array_agg(f.id order by f.k))[1] as first_id,
               (array_agg(f.created_at order by f.k desc))[1] as last_created_at,
               (array_agg(f.id order by f.k desc))[1] as last_id
          from firsts f
         group by f.group_key, f.priority, f.served, f.quantum
    ),
    -- The (priority, level) places of the first groups, with how many stand at or before each.
    levels as (
        select l.priority, l.level,
               (sum(l.heads) over (order by l.priority desc, l.level))::bigint as heads_up_to,
               lead(l.level) over (partition by l.priority order by l.level) as next_level
          from (select g.priority, g.level,
                       count(*) filter (where fairqueue.group_tenant_key(g.group_key)
                                              <> all(p_room_keys)) as heads
                  from groups g
                 group by 1, 2) l
    ),
    -- How many jobs each first group could take at all (the bound above): the rest of its
    -- quantum, and as many more as the places after its own leave room for in the batch (its
    -- jobs at levels past a place l and up to the next stand behind every group at l or before).
    -- Counted by cost a group's jobs stand at levels no lower than counted one each, so the
    -- bound holds as it is.
    reach as (
        select g.group_key, g.priority, g.served, g.quantum, g.level, g.gave, g.gave_units,
               g.last_created_at, g.last_id,
               greatest(g.quantum - g.served % g.quantum,
                        1 + coalesce(max(least(coalesce(g.quantum * (l.next_level + 1) - 1
                                                        - g.served, p_batch),
                                               p_batch - l.heads_up_to))
                                       filter (where p_batch - l.heads_up_to
                                                     >= g.quantum * (l.level + 1) - g.served),
                                     0)) as picks
          from groups g
          join levels l on l.priority = g.priority and l.level >= g.level
         group by g.group_key, g.priority, g.served, g.quantum, g.level, g.gave, g.gave_units,
                  g.last_created_at, g.last_id
    ),
    -- The least a group offers (a share of twice the batch when fewer groups' quanta than the
    -- batch offer first jobs), and the top priority among the groups.
    share as (
        select case when sum(r.quantum) >= p_batch then 1
                    else greatest(1, 2 * p_batch / greatest(count(*), 1)) end as per_group,
               max(r.priority) as top
          from reach r
    ),
    -- The level the top priority's groups fill the batch at.
    water as (
        select max(f.level) as level
          from (select array_agg(''::text) as keys, array_agg(p_batch::bigint) as batches,
                       array_agg(r.served) as served, array_agg(r.quantum) as quanta
                  from reach r, share
                 where r.priority = share.top
                   and fairqueue.group_tenant_key(r.group_key) <> all(p_room_keys)) a
          cross join lateral fairqueue.fill_levels(a.keys, a.batches, a.served, a.quanta) f
    ),
    -- How many jobs each group offers in all: most is all it could take, take is what it offers
    -- in this pass, never less than the share nor than it gave already (tight: the top
    -- priority's groups to one past the water level, the others their first jobs).
    allowed as (
        select r.group_key, r.priority, r.served, r.quantum, r.gave, r.gave_units,
               r.last_created_at, r.last_id, greatest(r.picks, share.per_group, r.gave) as most,
               greatest(case when not p_tight then r.picks
                             when r.priority = share.top
                                 then least(r.picks,
                                            r.quantum * (water.level + 1) - r.served + 1)
                             else r.gave end,
                        share.per_group, r.gave) as take
          from reach r, share, water
    ),
    -- The jobs on offer, each at its place k in its group: the first jobs (locked already:
    -- mine), then the group's next oldest due jobs, as many as it takes.
    offered_in_groups as (
        select f.id, f.group_key, f.priority, f.served, f.quantum, f.k, f.cost, f.created_at,
               true as mine
          from firsts f
        union all
        select c.id, a.group_key, a.priority, a.served, a.quantum,
               a.gave_units - c.cost + sum(c.cost) over (partition by a.group_key
                                                         order by c.created_at, c.id),
               c.cost, c.created_at, false
          from allowed a
          cross join lateral (
              select j.id, j.created_at, case when p_by_cost then j.cost else 1 end as cost
                from fairqueue.jobs j
               where a.take > a.gave
                 and j.type = p_type and j.status = 'pending'
                 and j.group_key = a.group_key and j.run_after <= now()
                 and (j.created_at, j.id) > (a.last_created_at, a.last_id)
               order by j.type, j.group_key, j.created_at, j.id
               limit a.take - a.gave) c
    ),
    -- Every job on offer with its key: its level, and its run's first job. Jobs whose claimer
    -- died before their last attempt join them, found by the lease index, few, and all offered,
    -- each a run of its own.
    offered as (
        select o.id, o.group_key, o.priority, (o.served + o.k) / o.quantum as level,
               first_value(o.created_at) over run as run_created_at,
               first_value(o.id) over run as run_id,
               o.created_at, o.mine, o.cost
          from offered_in_groups o
        window run as (partition by o.group_key, (o.served + o.k) / o.quantum
                       order by o.created_at, o.id)
        union all
        select j.id, null,
               fairqueue.plan_priority(t.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority),
               (coalesce(s.n, 0) - case when p_by_cost then j.counted else 1 end
                + sum(case when p_by_cost then j.cost else 1 end)
                      over (partition by j.group_key order by j.created_at, j.id))
                   / coalesce(s.quantum,
                              fairqueue.standing_quantum(p_type, coalesce(t.plan, ''))),
               j.created_at, j.id, j.created_at, false, null
          from fairqueue.jobs j
          left join fairqueue.groups g on g.key = j.group_key
          left join fairqueue.tenants t on t.id = j.tenant_id
          left join fairqueue.served s on s.type = p_type and s.group_key = j.group_key
         where j.type = p_type and j.status = 'running' and j.lease_until < now()
           and j.run_after <= now() and j.attempts < j.max_attempts
           and (g.status is null or g.status = 'active')
    ),
    -- The jobs on offer within their tenants' rooms: a capped tenant's first ones in the
    -- order's order, as many as its room. Jobs whose lease expired count as running already.
    within_caps as (
        select o.*
          from (select o.*, r.tenant_key, r.room,
                       row_number() over (partition by r.tenant_key
                                          order by o.level, o.run_created_at, o.run_id,
                                                   o.created_at, o.id) as nth
                  from offered o
                  left join unnest(p_room_keys, p_rooms) as r (tenant_key, room)
                         on o.group_key is not null
                        and r.tenant_key = fairqueue.group_tenant_key(o.group_key)) o
         where o.room is null or o.nth <= o.room
    ),
    -- The capped tenants whose room is full, with their last job within it: a job of theirs
    -- that stands after it is not picked. A tenant with no room has no last job, and stands
    -- before every job.
    tenants_full as (
        select w.tenant_key, w.level, w.run_created_at, w.run_id, w.created_at, w.id
          from within_caps w
         where w.nth = w.room
        union all
        select r.tenant_key, -1, '-infinity', '00000000-0000-0000-0000-000000000000',
               '-infinity', '00000000-0000-0000-0000-000000000000'
          from unnest(p_room_keys, p_rooms) as r (tenant_key, room)
         where r.room = 0
    ),
    -- Locked in the order's order, passing over what another claimer holds, until the batch is
    -- full: nothing is locked that this claim does not take, beyond the first jobs, which are
    -- locked already.
    picked as (
        select o.id, o.priority, o.level, o.run_created_at, o.run_id, o.created_at
          from (select o.* from within_caps o
                 order by o.priority desc, o.level, o.run_created_at, o.run_id, o.created_at,
                          o.id) o
          left join lateral (
              select j.id
                from fairqueue.jobs j
               where not o.mine
                 and j.id = o.id and j.type = p_type and j.run_after <= now()
                 and (j.status = 'pending'
                      or (j.status = 'running' and j.lease_until < now()
                          and j.attempts < j.max_attempts))
                 for update of j skip locked) l on true
         where o.mine or l.id is not null
         limit p_batch
    ),
    -- The batch's last pick and how many were picked, which the groups cut short are held
    -- against below.
    last_pick as (
        select p.priority, p.level, p.run_created_at, p.run_id, p.created_at, p.id,
               count(*) over () as picks
          from picked p
         order by p.priority, p.level desc, p.run_created_at desc, p.run_id desc,
                  p.created_at desc, p.id desc
         limit 1
    ),
    -- The groups allowed fewer jobs than they could take that offered all they were allowed,
    -- with where their next job would stand: at the level of its place, and after their last
    -- job on offer, within that job's run when it is of the same level (its run's first job,
    -- then its own time) and otherwise as the first of a run that starts after it.
    cut_short as (
        select a.priority, n.next_level, fairqueue.group_tenant_key(a.group_key) as tenant_key,
               case when n.in_run then o.run_created_at else o.last_created_at end
                   as after_run_created_at,
               case when n.in_run then o.run_id else o.last_id end as after_run_id,
               case when n.in_run then o.last_created_at else 'infinity' end
                   as after_created_at,
               case when n.in_run then o.last_id
                    else 'ffffffff-ffff-ffff-ffff-ffffffffffff' end as after_id
          from allowed a
          join (select o.group_key, count(*) as offered, sum(o.cost) as offered_units,
                       (array_agg(o.level order by o.created_at desc, o.id desc))[1]
                           as last_level,
                       (array_agg(o.run_created_at order by o.created_at desc, o.id desc))[1]
                           as run_created_at,
                       (array_agg(o.run_id order by o.created_at desc, o.id desc))[1] as run_id,
                       (array_agg(o.created_at order by o.created_at desc, o.id desc))[1]
                           as last_created_at,
                       (array_agg(o.id order by o.created_at desc, o.id desc))[1] as last_id
                  from offered o
                 where o.group_key is not null
                 group by 1) o on o.group_key = a.group_key
         cross join lateral (
             select (a.served + o.offered_units) / a.quantum as next_level,
                    (a.served + o.offered_units) / a.quantum = o.last_level as in_run) n
         where a.take < a.most and o.offered = a.take
    )
    select array(select p.id from picked p
                  order by p.priority desc, p.level, p.run_created_at, p.run_id, p.created_at,
                           p.id),
           not exists (
               select 1
                 from cut_short c
                 left join last_pick l on true
                where l.picks is distinct from p_batch::bigint
                   or not (c.priority < l.priority
                           or (c.priority = l.priority
                               and (c.next_level > l.level
                                    or (c.next_level = l.level
                                        and (c.after_run_created_at, c.after_run_id,
                                             c.after_created_at, c.after_id)
                                            >= (l.run_created_at, l.run_id, l.created_at,
                                                l.id)))))
                  and not exists (
                      select 1
                        from tenants_full t
                       where t.tenant_key = c.tenant_key
                         and (c.next_level > t.level
                              or (c.next_level = t.level
                                  and (c.after_run_created_at, c.after_run_id,
                                       c.after_created_at, c.after_id)
                                      >= (t.run_created_at, t.run_id, t.created_at,
                                          t.id)))));
end $$;

alter function fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean, text[], integer[], boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean, text[], integer[], boolean) from public, fairqueue_app;
