-- The first p_limit tenants of a type by their first pick (their first run's), over every plan:
-- plan priority, then whole quanta served (each by its own standing's quantum: its plan's under
-- shares), then their best group, as the standings' index orders them, leaving out p_passed (the
-- capped tenants with no room). The plans with tenants standing are found by a skip scan of the
-- index. The one spelling of that ranking, for the tenant claim's picks and for the rooms it
-- asks for first (claim_by_tenant_unchecked); one statement, inlined where it is called.
create or replace function fairqueue.tenants_in_order(
    p_type text,
    p_limit integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_passed text[]
) returns table (tenant_key text, plan text, n bigint, quantum integer, level bigint,
                 priority integer)
language sql stable
as $$
with recursive present (plan) as (
    (select t.plan from fairqueue.tenant_standings t
      where t.type = p_type and t.best_id is not null
      order by t.plan limit 1)
    union all
    select (select t.plan from fairqueue.tenant_standings t
             where t.type = p_type and t.best_id is not null and t.plan > p.plan
             order by t.plan limit 1)
      from present p
     where p.plan is not null
)
select x.tenant_key, p.plan, x.n, x.quantum, x.n / x.quantum as level,
       fairqueue.plan_priority(p.plan, p_plan_names, p_plan_priorities,
                               p_default_priority) as priority
  from present p
  cross join lateral (
      select t.tenant_key, t.n, t.quantum, t.best_n, t.best_created_at, t.best_id
        from fairqueue.tenant_standings t
       where t.type = p_type and t.plan = p.plan and t.best_id is not null
         and t.tenant_key <> all(p_passed)
       order by t.n / t.quantum, t.best_n, t.best_created_at, t.best_id
       limit p_limit) x
 where p.plan is not null
 order by 6 desc, 5, x.best_n, x.best_created_at, x.best_id
 limit p_limit
$$;

alter function fairqueue.tenants_in_order(text, integer, text[], integer[], integer, text[])
    owner to fairqueue_owner;
revoke all on function fairqueue.tenants_in_order(text, integer, text[], integer[], integer,
    text[]) from public, fairqueue_app;

-- The picks of a claim by tenant: the first p_batch picks of the order (claim_by_tenant_unchecked
-- below), locked in the order's order, with whether they are surely the batch.
--
-- The bounds count only the first picks of the others, so a tenant few others share the batch
-- with is allowed nearly all of it, and a group few others of its tenant share the tenant's
-- picks with nearly all of those: three tenants of the top plan with twenty groups each offered
-- 2,800 jobs for a batch of 100. So when p_tight is set, the top priority's tenants take only as
-- many picks as they would reach if each had picks enough (fill_levels, one more for a pick
-- another transaction holds), the tenants below them one, and within each tenant its groups
-- offer only as deep as they would reach filling the tenant's picks. The picks are surely the
-- batch unless a tenant or a group that offered all it was allowed, while it could have given
-- more, has its next pick standing before the batch's last pick (a tenant) or its tenant's last
-- pick (a group), or at all when the batch or the tenant came back short; the caller then asks
-- again without p_tight.
--
-- Counted by cost (p_by_cost), a job counts its cost where it counts one otherwise: a group's
-- job stands in its tenant at the group's count plus the costs of its jobs before it, and a
-- tenant's pick at its count plus the costs of its picks before it. Picks so stand no earlier
-- than counted one each, and the bounds, which count one a pick, hold as they are.
--
-- A capped tenant (sql/order/caps.sql) takes no more picks than its room, beside its key in
-- p_room_keys and p_rooms; one with no room is passed over.
create or replace function fairqueue.claim_by_tenant_picks(
    p_type text,
    p_batch integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
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
    -- The first p_batch tenants by their first pick, less the capped ones with no room, each
    -- capped one with its room.
    with tenants as (
        select x.tenant_key, x.n, x.quantum, x.level, x.priority, r.room
          from fairqueue.tenants_in_order(
                   p_type, p_batch, p_plan_names, p_plan_priorities, p_default_priority,
                   array(select r.tenant_key
                           from unnest(p_room_keys, p_rooms) as r (tenant_key, room)
                          where r.room = 0)) x
          left join unnest(p_room_keys, p_rooms) as r (tenant_key, room)
                 on r.tenant_key = x.tenant_key
    ),
    -- How many picks each tenant can take: its picks at a level x stand behind every tenant of
    -- a higher priority and every tenant of its own at a lower level, and behind its own
    -- q(x + 1) - n picks of the levels before. The levels are the (priority, level) places of
    -- the tenants, with how many stand at or before each.
    tenant_levels as (
        select l.priority, l.level,
               (sum(l.heads) over (order by l.priority desc, l.level))::bigint as heads_up_to,
               lead(l.level) over (partition by l.priority order by l.level) as next_level
          from (select t.priority, t.level, count(*) as heads from tenants t group by 1, 2) l
    ),
    -- Each tenant's bound: the rest of its current quantum, or as many as its picks up to the
    -- next place after each of its own or later (up to l's next level, where every tenant at l
    -- or before stands ahead of it with a pick) leave room for in the batch. With a quantum of
    -- 1 that is one pick and as many more as the places after its own leave room for. A
    -- capped tenant's bound is at most its room.
    tenant_reach as (
        select t.tenant_key, t.n, t.quantum, t.priority,
               least(greatest(least(t.quantum * (t.level + 1) - t.n, p_batch),
                              max(least(coalesce(t.quantum * (l.next_level + 1) - t.n, p_batch),
                                        p_batch - l.heads_up_to + 1))),
                     coalesce(t.room, p_batch)) as most
          from tenants t
          join tenant_levels l on l.priority = t.priority and l.level >= t.level
         group by t.tenant_key, t.n, t.quantum, t.level, t.priority, t.room
    ),
    -- The top priority among those tenants: only its tenants offer more than a pick when tight.
    top as (select max(r.priority) as priority from tenant_reach r),
    -- The level the top priority's tenants fill the batch at.
    tenant_water as (
        select max(f.level) as level
          from (select array_agg(''::text) as keys, array_agg(p_batch::bigint) as batches,
                       array_agg(r.n) as served, array_agg(r.quantum) as quanta
                  from tenant_reach r, top
                 where r.priority = top.priority
                -- Not needed when each tenant may take one pick (the common case).
                having bool_or(r.most > 1)) a
          cross join lateral fairqueue.fill_levels(a.keys, a.batches, a.served, a.quanta) f
    ),
    -- How many picks each tenant offers in this pass: its bound, or when tight the top
    -- priority's tenants through the water level and one more, and the others one.
    tenant_allowed as (
        select r.tenant_key, r.n, r.quantum, r.priority, r.most,
               case when not p_tight then r.most
                    when r.priority = top.priority
                        then least(r.most,
                                   greatest(r.quantum * (w.level + 1) - r.n + 1, 1))
                    else 1 end as picks
          from tenant_reach r, top, tenant_water w
    ),
    -- Each of those tenants' first groups, as many as it may take picks.
    tenant_groups as (
        select a.tenant_key, a.n as tenant_n, a.priority, a.picks, g.group_key, g.n,
               g.head_created_at, g.head_id
          from tenant_allowed a
          cross join lateral (
              select s.group_key, s.n, s.head_created_at, s.head_id
                from fairqueue.served s
               where s.type = p_type and s.tenant_key = a.tenant_key
                 and s.head_id is not null and not s.paused
               order by s.n, s.head_created_at, s.head_id
               limit a.picks) g
    ),
    -- The same bound within a tenant, over its groups and its own picks.
    group_levels as (
        select l.tenant_key, l.n,
               (sum(l.heads) over (partition by l.tenant_key order by l.n))::bigint
                   as heads_up_to,
               lead(l.n) over (partition by l.tenant_key order by l.n) as next_n
          from (select g.tenant_key, g.n, count(*) as heads
                  from tenant_groups g
                 group by 1, 2) l
    ),
    -- Each group's bound within its tenant's picks.
    group_reach as (
        select g.tenant_key, g.tenant_n, g.priority, g.picks, g.group_key, g.n,
               g.head_created_at, g.head_id,
               1 + coalesce(max(least(coalesce(l.next_n - g.n, g.picks),
                                      g.picks - l.heads_up_to))
                              filter (where g.picks - l.heads_up_to >= l.n - g.n + 1),
                            0) as most
          from tenant_groups g
          join group_levels l on l.tenant_key = g.tenant_key and l.n >= g.n
         group by 1, 2, 3, 4, 5, 6, 7, 8
    ),
    -- The level each tenant's groups fill its picks at, for the tenants with more than one.
    group_water as materialized (
        select f.key as tenant_key, f.level
          from (select array_agg(r.tenant_key) as keys, array_agg(r.picks) as batches,
                       array_agg(r.n) as served, array_agg(1) as quanta
                  from group_reach r
                 where r.picks > 1) a
          cross join lateral fairqueue.fill_levels(a.keys, a.batches, a.served, a.quanta) f
    ),
    -- How many jobs each group offers in this pass: its bound, or when tight and its tenant
    -- takes more than one pick, one past the level its tenant's groups fill at.
    group_allowed as (
        select r.tenant_key, r.tenant_n, r.priority, r.picks, r.group_key, r.n,
               r.head_created_at, r.head_id, r.most,
               case when not p_tight or r.picks <= 1 then r.most
                    else least(r.most, greatest(w.level - r.n + 2, 1)) end as jobs
          from group_reach r
          left join group_water w on w.tenant_key = r.tenant_key
    ),
    -- Each group's oldest due jobs, as many as it may give, from its head on (see
    -- claim_firsts); a paused group gives none.
    offered as (
        select j.id, j.created_at, a.priority, a.tenant_n, a.picks, a.tenant_key, a.group_key,
               j.cost,
               a.n + 1 - j.cost + sum(j.cost) over (partition by a.group_key
                                                    order by j.created_at, j.id)
                   as group_place,
               row_number() over (partition by a.group_key order by j.created_at, j.id)
                   as group_pick
          from group_allowed a
          cross join lateral (
              select j.id, j.created_at, case when p_by_cost then j.cost else 1 end as cost
                from fairqueue.jobs j
               where j.type = p_type and j.status = 'pending'
                 and j.group_key = a.group_key and j.run_after <= now()
                 and (j.created_at, j.id) >= (a.head_created_at, a.head_id)
                 and not exists (select 1 from fairqueue.groups g
                                  where g.key = a.group_key and g.status = 'paused')
               order by j.type, j.group_key, j.created_at, j.id
               limit a.jobs) j
    ),
    -- The jobs on offer ranked within their tenant: a tenant's picks merge its groups' jobs.
    ranked_in_tenants as (
        select o.id, o.created_at, o.priority, o.group_place, o.picks, o.tenant_key,
               row_number() over in_tenant as pick,
               o.tenant_n - o.cost + sum(o.cost) over in_tenant as tenant_place,
               o.tenant_n + sum(o.cost) over in_tenant as tenant_through
          from offered o
        window in_tenant as (partition by o.tenant_key order by o.group_place, o.created_at, o.id)
    ),
    -- Each pick's key: its tenant's level at it, and its run's first pick (its place in its
    -- group, its time and id), which every pick of a tenant's run stands at.
    ranked as (
        select r.id, r.created_at, r.priority, r.group_place, r.picks, r.tenant_key, r.pick,
               r.tenant_through, r.tenant_place / a.quantum as level,
               first_value(r.group_place) over run as run_place,
               first_value(r.created_at) over run as run_created_at,
               first_value(r.id) over run as run_id
          from ranked_in_tenants r
          join tenant_allowed a on a.tenant_key = r.tenant_key
        window run as (partition by r.tenant_key, r.tenant_place / a.quantum order by r.pick)
    ),
    -- Each job on offer with its key: those within the picks their tenant may take, and the
    -- jobs whose lease expired.
    offers (id, priority, level, run_place, run_created_at, run_id, pick) as (
        select r.id, r.priority, r.level, r.run_place, r.run_created_at, r.run_id, r.pick
          from ranked r
         where r.pick <= r.picks
        union all
        -- Jobs whose claimer died before their last attempt: found by the lease index, few,
        -- each a run of its own. They stand after their tenant's and their group's counts,
        -- which count them already.
        select j.id,
               fairqueue.plan_priority(t.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority),
               (coalesce(ts.n, 0) - case when p_by_cost then j.counted else 1 end
                + sum(case when p_by_cost then j.cost else 1 end)
                      over (partition by fairqueue.group_tenant_key(j.group_key)
                            order by j.created_at, j.id))
                   / coalesce(ts.quantum,
                              fairqueue.tenant_quantum(p_type, coalesce(t.plan, ''))),
               coalesce(s.n, 0) + 1 - case when p_by_cost then j.counted else 1 end
               + sum(case when p_by_cost then j.cost else 1 end)
                     over (partition by j.group_key order by j.created_at, j.id),
               j.created_at, j.id,
               row_number() over (partition by fairqueue.group_tenant_key(j.group_key)
                                  order by j.created_at, j.id)
          from fairqueue.jobs j
          left join fairqueue.groups g on g.key = j.group_key
          left join fairqueue.tenants t on t.id = j.tenant_id
          left join fairqueue.served s on s.type = p_type and s.group_key = j.group_key
          left join fairqueue.tenant_standings ts
                 on ts.type = p_type
                and ts.tenant_key = fairqueue.group_tenant_key(j.group_key)
         where j.type = p_type and j.status = 'running' and j.lease_until < now()
           and j.run_after <= now() and j.attempts < j.max_attempts
           and (g.status is null or g.status = 'active')
    ),
    -- Locked in the order's order, passing over what another transaction holds, until the
    -- batch is full.
    picked as (
        select o.id, o.priority, o.level, o.run_place, o.run_created_at, o.run_id, o.pick
          from (select o.id, o.priority, o.level, o.run_place, o.run_created_at, o.run_id,
                       o.pick
                  from offers o
                 order by o.priority desc, o.level, o.run_place, o.run_created_at, o.run_id,
                          o.pick) o
          cross join lateral (
              select j.id
                from fairqueue.jobs j
               where j.id = o.id and j.type = p_type and j.run_after <= now()
                 and (j.status = 'pending'
                      or (j.status = 'running' and j.lease_until < now()
                          and j.attempts < j.max_attempts))
                 for update of j skip locked) l
         limit p_batch
    ),
    -- The batch's last pick and how many were picked, which the tenants cut short are held
    -- against below.
    last_pick as (
        select p.priority, p.level, p.run_place, p.run_created_at, p.run_id, p.pick,
               count(*) over () as picks
          from picked p
         order by p.priority, p.level desc, p.run_place desc, p.run_created_at desc,
                  p.run_id desc, p.pick desc
         limit 1
    ),
    -- Each tenant's last pick among its offers, when it offered as many as it may take.
    tenant_last_pick as (
        select r.tenant_key, r.group_place, r.created_at, r.id, r.level, r.run_place,
               r.run_created_at, r.run_id, r.tenant_through
          from ranked r
         where r.pick = r.picks
    ),
    -- The tenants allowed fewer picks than they could take that offered as many as they were
    -- allowed, with where their next pick would stand: at its level, within its last offer's
    -- run when it is of the same level, and otherwise as the first of a run whose first pick
    -- comes after that offer in the tenant's own order (a tenant's picks rise in that order).
    tenants_cut_short as (
        select a.priority, n.next_level,
               case when n.in_run then l.run_place else l.group_place end as after_place,
               case when n.in_run then l.run_created_at else l.created_at end
                   as after_created_at,
               case when n.in_run then l.run_id else l.id end as after_id,
               case when n.in_run then a.picks + 1 else 9223372036854775807 end as after_pick
          from tenant_allowed a
          join tenant_last_pick l on l.tenant_key = a.tenant_key
         cross join lateral (
             select l.tenant_through / a.quantum as next_level,
                    l.tenant_through / a.quantum = l.level as in_run) n
         where a.picks < a.most
    ),
    -- The groups allowed fewer jobs than they could give that offered all they were allowed,
    -- with their last offer and where their next job would stand.
    groups_cut_short as (
        select a.tenant_key, o.group_place + o.cost as next_place,
               o.created_at as last_created_at, o.id as last_id
          from group_allowed a
          join offered o on o.group_key = a.group_key and o.group_pick = a.jobs
         where a.jobs < a.most
    )
    select array(select p.id from picked p),
           not exists (
               select 1
                 from tenants_cut_short c
                 left join last_pick l on true
                where l.picks is distinct from p_batch::bigint
                   or not (c.priority < l.priority
                           or (c.priority = l.priority
                               and (c.next_level, c.after_place, c.after_created_at,
                                    c.after_id, c.after_pick)
                                   >= (l.level, l.run_place, l.run_created_at, l.run_id,
                                       l.pick))))
           and not exists (
               select 1
                 from groups_cut_short c
                 left join tenant_last_pick l on l.tenant_key = c.tenant_key
                where l.tenant_key is null
                   or not (c.next_place > l.group_place
                           or (c.next_place = l.group_place
                               and (c.last_created_at, c.last_id) >= (l.created_at, l.id))));
end $$;

alter function fairqueue.claim_by_tenant_picks(text, integer, text[], integer[], integer,
    boolean, text[], integer[], boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_by_tenant_picks(text, integer, text[], integer[], integer,
    boolean, text[], integer[], boolean) from public, fairqueue_app;

-- The fair claim at the tenant level (Stage(fair_share="tenant")), the one definition of that
-- order: plan priority, then the tenant served the fewest whole quanta of this type in the last day
-- (its best group breaking ties), the tenant at the top giving the rest of its quantum, then within
-- the tenant the group served least, then the oldest job; each pick counts for the next at both
-- levels. A batch of N is exactly the first N picks of that order made one at a time, less the jobs
-- another transaction holds.
--
-- A tenant's own picks, in the order it makes them, are the group-level order of its groups alone
-- (one job a turn), and its pick k (from 0) stands at level (its served count + k) / its quantum
-- (its standing's: the stage's, or under shares its plan's); its picks of one level are a run, and
-- each stands where the run's first pick stands: (level, that pick's place among its groups, then
-- its own number). With a quantum (a stage's quantum=q) the tenant at the top so gives the rest of
-- its quantum in a row; with 1 every run is one pick. Every tenant's picks rise in that key, so
-- taking the picks one at a time is merging the tenants' sequences, and a batch is the N smallest
-- keys of the merge. The first N tenants (by their first pick, which their standing carries) hold
-- all of them. Each of those can take at most as many picks as the bound below allows (the tenants
-- at or below each level take at least one pick each before its picks past that level); within a
-- tenant the same bound over its groups says how many jobs each group can give. Those jobs are
-- ranked within their tenants, then all together, and locked in that order until the batch is full
-- (claim_by_tenant_picks).
--
-- Claims by tenant of one type take turns (a transaction lock per type): the tenant standings are
-- written by these claims alone, from the log the triggers on served append to, so the writers of
-- groups never wait on a tenant's row.
--
-- A tenant on a capped plan (p_plan_caps, p_default_cap; sql/order/caps.sql) takes no more picks
-- than its room; the rooms of the capped tenants among the first p_batch are asked for before
-- the picks, and those with none are passed over for the next ones, until the first p_batch
-- tenants with room are known.
create or replace function fairqueue.claim_by_tenant_unchecked(
    p_type text,
    p_batch integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_plan_quanta integer[],
    p_default_quantum integer,
    p_plan_caps integer[],
    p_default_cap integer,
    p_by_cost boolean
) returns table (id uuid, tenant_id text)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    stale text[];
    looked_again boolean := false;
    tight boolean;
    verified boolean;
    picked_ids uuid[];
    claimed_ids uuid[];
    claimed_tenants text[];
    room_keys text[];
    rooms integer[];
    met_keys text[];
    met_plans text[];
begin
    perform fairqueue.lock_tenant_claims(array[p_type]);
    perform fairqueue.tenant_level_listed(p_type, p_plan_names, p_plan_quanta,
                                          p_default_quantum);
    perform fairqueue.tenant_standings_restamped(p_type, p_plan_names, p_plan_quanta,
                                                 p_default_quantum);

    perform fairqueue.stand_woken_groups(p_type);

    loop
        perform fairqueue.tenant_standings_fold(p_type);

        room_keys := '{}';
        rooms := '{}';
        while fairqueue.any_cap(p_plan_caps, p_default_cap) loop
            select array_agg(x.tenant_key), array_agg(x.plan) into met_keys, met_plans
              from fairqueue.tenants_in_order(
                       p_type, p_batch, p_plan_names, p_plan_priorities, p_default_priority,
                       array(select r.tenant_key
                               from unnest(room_keys, rooms) as r (tenant_key, room)
                              where r.room = 0)) x
             where x.tenant_key <> all(room_keys)
               and fairqueue.plan_cap(x.tenant_key, x.plan, p_plan_names, p_plan_caps,
                                      p_default_cap) > 0;
            exit when met_keys is null;
            select room_keys || array_agg(r.tenant_key), rooms || array_agg(r.room)
              into room_keys, rooms
              from fairqueue.tenant_rooms(array_fill(p_type, array[cardinality(met_keys)]),
                                          met_keys, met_plans, p_plan_names, p_plan_caps,
                                          p_default_cap, true) r;
        end loop;

        -- The picks, offered first only as deep as the tenants and their groups reach if each
        -- has picks enough (tight): most claims. When that proves too shallow, the locks are
        -- undone with the subtransaction and each offers as many as it could take at all. The
        -- picks are updated in the subtransaction that locked them: updated from outside it,
        -- each row's lock would have to be kept beside the update in a multixact.
        tight := true;
        loop
            begin
                select p.ids, p.verified into picked_ids, verified
                  from fairqueue.claim_by_tenant_picks(p_type, p_batch, p_plan_names,
                                                       p_plan_priorities, p_default_priority,
                                                       tight, room_keys, rooms, p_by_cost) p;
                if tight and not verified then
                    raise exception using errcode = 'FQ002';
                end if;
                select t.ids, t.tenant_ids into claimed_ids, claimed_tenants
                  from fairqueue.take_claimed(picked_ids, p_lease_s, p_locked_by, p_run_id,
                                              p_by_cost) t;
                exit;
            exception when sqlstate 'FQ002' then
                tight := false;
            end;
        end loop;

        -- Nothing claimed although tenants stand with work: a best group standing wrong (its
        -- jobs changed in a way no trigger saw, such as a truncate, or it was paused since)
        -- stands again from its jobs, its tenant with it at the fold, and the claim looks
        -- again, once.
        exit when claimed_ids is not null or looked_again;
        select array_agg(s.group_key) into stale
          from fairqueue.tenant_standings t
          join lateral (
              select s.group_key, s.head_id
                from fairqueue.served s
               where s.type = p_type and s.group_key = t.best_group_key
               limit 1) s on true
         where t.type = p_type and t.best_id is not null
           and (not exists (select 1 from fairqueue.jobs j
                             where j.id = s.head_id and j.status = 'pending'
                               and j.run_after <= now())
                or exists (select 1 from fairqueue.groups g
                            where g.key = s.group_key and g.status = 'paused'));
        exit when stale is null;
        perform fairqueue.recompute_standings(array_fill(p_type, array[cardinality(stale)]),
                                              stale);
        looked_again := true;
    end loop;

    return query select u.id, u.tenant_id
                   from unnest(claimed_ids, claimed_tenants) as u (id, tenant_id);
end $$;

alter function fairqueue.claim_by_tenant_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer, integer[], integer, boolean)
    owner to fairqueue_owner;
revoke all on function fairqueue.claim_by_tenant_unchecked(text, integer, double precision, text,
    uuid, text[], integer[], integer, integer[], integer, integer[], integer, boolean)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs claim_by_tenant_unchecked as the owner. The quanta,
-- the caps and p_by_cost are handed as to the group claim's door (fairqueue.claim): each plan's
-- beside its name, and the default.
create or replace function fairqueue.claim_by_tenant(
    p_type text,
    p_batch integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_plan_quanta integer[],
    p_default_quantum integer,
    p_plan_caps integer[],
    p_default_cap integer,
    p_by_cost boolean default false
) returns table (id uuid, tenant_id text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_claim_arguments(p_batch, p_lease_s, p_locked_by);
select fairqueue.door_quanta_arguments(p_plan_names, p_plan_quanta, p_default_quantum);
select fairqueue.door_caps_arguments('claim', p_plan_names, p_plan_caps, p_default_cap);
select fairqueue.door_argument(p_by_cost is not null,
    'claim_by_tenant: by cost must be true or false');
select * from fairqueue.claim_by_tenant_unchecked(p_type, p_batch, p_lease_s, p_locked_by,
    p_run_id, p_plan_names, p_plan_priorities, p_default_priority, p_plan_quanta,
    p_default_quantum, p_plan_caps, p_default_cap, p_by_cost);
$$;

alter function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer, integer[], integer, boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer, integer[], integer, boolean)
    from public, fairqueue_app;
grant execute on function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer, integer[], integer, boolean) to fairqueue_app;
