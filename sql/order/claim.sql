-- A plan's priority in the fair order: the priority p_plan_priorities gives it beside its name
-- in p_plan_names, or p_default_priority for a plan not named there (no tenant, or a plan the
-- caller does not know). The one spelling of that lookup, for both claims and the standings an
-- operator reads (sql/functions/job_info.sql). One expression with every name
-- schema-qualified and no SET clause, so that the planner inlines it where it is called, as it
-- does fill_levels below.
create or replace function fairqueue.plan_priority(
    p_plan text,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer
) returns integer
language sql immutable parallel safe
as $$
select coalesce(p_plan_priorities[pg_catalog.array_position(p_plan_names, p_plan)],
                p_default_priority)
$$;

alter function fairqueue.plan_priority(text, text[], integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.plan_priority(text, text[], integer[], integer)
    from public, fairqueue_app;

-- What a claim writes on each job it takes: running, one more attempt, a lease of p_lease_s and
-- its claimer, and the units it counts as served from now on (`counted`: its cost when the
-- claim counts by cost, else 1), which every writer of served adds and takes away. Both claims
-- call it in the subtransaction that locked the rows (see claim_unchecked); the ids and tenants
-- come back as one row of arrays, in no order.
create or replace function fairqueue.take_claimed(
    p_ids uuid[],
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_by_cost boolean default false
) returns table (ids uuid[], tenant_ids text[])
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    return query
    with claimed as (
        update fairqueue.jobs j
           set status = 'running',
               attempts = j.attempts + 1,
               locked_at = now(),
               lease_until = now() + p_lease_s * interval '1 second',
               locked_by = p_locked_by,
               run_id = p_run_id,
               counted = case when p_by_cost then j.cost else 1 end
         where j.id = any(p_ids)
        returning j.id, j.tenant_id
    )
    select array_agg(c.id), array_agg(c.tenant_id) from claimed c;
end $$;

alter function fairqueue.take_claimed(uuid[], double precision, text, uuid, boolean)
    owner to fairqueue_owner;
revoke all on function fairqueue.take_claimed(uuid[], double precision, text, uuid, boolean)
    from public, fairqueue_app;

-- The fair claim, the one definition of the order: plan priority, then the group served least
-- of this type in the last day (each job picked from a group in this batch counts as served, so
-- a batch interleaves groups), then the oldest job. A batch of N is exactly the first N picks of
-- that order made one at a time, less the groups and jobs another claimer holds.
--
-- The first p_batch groups that offer a job (claim_firsts) hold all the batch's picks: their
-- p_batch first jobs pick before any job of a group ranked below them. The picks are the best
-- p_batch of the jobs those groups offer (claim_picks).
--
-- A tenant on a capped plan (p_plan_caps, p_default_cap; sql/order/caps.sql) is passed over
-- once it has as many of the type's jobs running as its cap: the first jobs take no more than
-- its room, and the picks no more of its jobs than the room it has when they are made.
create or replace function fairqueue.claim_unchecked(
    p_type text,
    p_batch integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_plan_caps integer[],
    p_default_cap integer,
    p_by_cost boolean
) returns table (id uuid, tenant_id text)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    firsts fairqueue.ranked_job[];
    hold boolean;
    tight boolean;
    verified boolean;
    picked_ids uuid[];
    claimed_ids uuid[];
    claimed_tenants text[];
    room_keys text[];
    rooms integer[];
begin
    -- A type claimed by group keeps no tenant standings (sql/order/tenant_standings.sql).
    perform fairqueue.tenant_level_unlisted(p_type);

    perform fairqueue.stand_woken_groups(p_type);

    -- One attempt is one subtransaction: the first jobs, the picks and their update. Two kinds
    -- of attempt are undone and made again:
    -- - A first pass that holds groups and finds nothing may still hold standings whose jobs
    --   others hold, so the next attempt, which waits for standings when it writes them, holds
    --   none while it waits and two claims never wait on each other.
    -- - Picks offered as deep as the top priority's groups reach if each has jobs enough (tight:
    --   most claims) that prove too shallow (a group offered all it was allowed and its next
    --   job would stand in the batch): the next attempt lets each group offer as many as it
    --   could take at all.
    -- The rows are locked and updated in one subtransaction because a row locked in one and
    -- updated in another keeps the lock beside the update in a multixact, which every later
    -- reader of that row version has to look up: a claim over many groups did so for every
    -- first job.
    hold := true;
    tight := true;
    loop
        begin
            firsts := fairqueue.claim_firsts(p_type, p_batch, p_plan_names, p_plan_priorities,
                                             p_default_priority, hold, p_plan_caps,
                                             p_default_cap, p_by_cost);
            if hold and cardinality(firsts) = 0 then
                raise exception using errcode = 'FQ001';
            end if;
            -- The rooms of the capped tenants of the first jobs, whose locks claim_firsts took.
            select coalesce(array_agg(r.tenant_key), '{}'), coalesce(array_agg(r.room), '{}')
              into room_keys, rooms
              from (select array_agg(fairqueue.group_tenant_key(f.group_key)) as keys,
                           array_agg(f.plan) as plans
                      from unnest(firsts) f
                     where fairqueue.any_cap(p_plan_caps, p_default_cap)) met
             cross join lateral fairqueue.tenant_rooms(
                       array_fill(p_type, array[coalesce(cardinality(met.keys), 0)]),
                       coalesce(met.keys, '{}'), coalesce(met.plans, '{}'), p_plan_names,
                       p_plan_caps, p_default_cap, false) r;
            select p.ids, p.verified into picked_ids, verified
              from fairqueue.claim_picks(p_type, p_batch, p_plan_names, p_plan_priorities,
                                         p_default_priority, firsts, tight, room_keys,
                                         rooms, p_by_cost) p;
            if tight and not verified then
                raise exception using errcode = 'FQ002';
            end if;
            select t.ids, t.tenant_ids into claimed_ids, claimed_tenants
              from fairqueue.take_claimed(picked_ids, p_lease_s, p_locked_by, p_run_id,
                                          p_by_cost) t;
            exit;
        exception
            when sqlstate 'FQ001' then
                hold := false;
            when sqlstate 'FQ002' then
                tight := false;
        end;
    end loop;

    return query select u.id, u.tenant_id
                   from unnest(claimed_ids, claimed_tenants) as u (id, tenant_id);
end $$;

alter function fairqueue.claim_unchecked(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer, boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer, boolean) from public, fairqueue_app;

-- The door: checks the arguments, stamps the type's quanta if ready_for_claim has not (a caller
-- of the door alone), then runs claim_unchecked as the owner. p_plan_quanta is each named plan's
-- quantum beside its name, p_default_quantum the quantum of the groups of any other plan or of
-- no tenant (fairqueue.Plans.claim_params). p_plan_caps is each named plan's cap of running
-- jobs per tenant beside its name, p_default_cap the cap of a tenant of any other plan (0 or
-- null: none; jobs with no tenant have none). p_by_cost counts each job as its cost, not as one
-- (Stage(fair_by="cost")): in the order's levels and in the served counts from its claim on.
create or replace function fairqueue.claim(
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
select fairqueue.door_caps_arguments('claim', p_plan_names, p_plan_caps, p_default_cap);
select fairqueue.quanta_stamped(p_type, p_plan_names, p_plan_quanta, p_default_quantum);
select fairqueue.door_argument(p_by_cost is not null, 'claim: by cost must be true or false');
select * from fairqueue.claim_unchecked(p_type, p_batch, p_lease_s, p_locked_by, p_run_id,
    p_plan_names, p_plan_priorities, p_default_priority, p_plan_caps, p_default_cap, p_by_cost);
$$;

alter function fairqueue.claim(text, integer, double precision, text, uuid, text[], integer[],
    integer, integer[], integer, integer[], integer, boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer, integer[], integer, boolean) from public, fairqueue_app;
grant execute on function fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer, integer[], integer, boolean) to fairqueue_app;

-- A plan's quantum in a type's quanta as quanta_map keeps them: the plan's beside its name, else
-- the default. The one spelling of that lookup, for the group standings (standing_quantum) and
-- the tenant standings (tenant_quantum, sql/order/tenant_standings.sql). No SET clause, so that
-- it is inlined where it is called.
create or replace function fairqueue.plan_quantum(
    p_plan text,
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns integer
language sql immutable parallel safe
as $$
select coalesce(p_plan_quanta[pg_catalog.array_position(p_plan_names, p_plan)], p_default_quantum)
$$;

alter function fairqueue.plan_quantum(text, text[], integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.plan_quantum(text, text[], integer[], integer)
    from public, fairqueue_app;

-- The quantum of a type's standing of a plan (sql/migrations/0051_shares.sql): the plan's in
-- type_quanta's row of the type, else that row's default, else 1. Every standing carries it, so
-- that the standing index ranks the type's groups by whole quanta served; the enqueue's triggers
-- stamp new standings with it, a plan change its tenant's. One key read, inlined where it is
-- called.
create or replace function fairqueue.standing_quantum(p_type text, p_plan text) returns integer
language sql stable
as $$
select coalesce((select fairqueue.plan_quantum(p_plan, q.plan_names, q.plan_quanta, q.quantum)
                   from fairqueue.type_quanta q
                  where q.type = p_type),
                1)
$$;

alter function fairqueue.standing_quantum(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.standing_quantum(text, text) from public, fairqueue_app;

-- The plans whose quantum is not the default, by name, and their quanta: how a type's quanta
-- are kept (type_quanta, tenant_level_types), so that the same quanta handed in another order
-- or with the default's plans named compare equal.
create or replace function fairqueue.quanta_map(
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns table (names text[], quanta integer[])
language sql immutable
as $$
select coalesce(array_agg(u.plan order by u.plan), '{}'),
       coalesce(array_agg(u.quantum order by u.plan), '{}')
  from unnest(p_plan_names, p_plan_quanta) as u (plan, quantum)
 where u.quantum <> p_default_quantum
$$;

alter function fairqueue.quanta_map(text[], integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.quanta_map(text[], integer[], integer)
    from public, fairqueue_app;

-- Makes these the type's quanta, in type_quanta and on each of its standings, when they are not
-- already (a stage's quantum, its order or a plan's weight changed): one key read otherwise.
-- The row keeps the quanta as quanta_map gives them; a type with no row has every quantum 1. A
-- door: the quanta are checked here. The
-- standings table is locked against writers while they change, so that no enqueue's trigger
-- writes a new standing with an old quantum after them; ready_for_claim stamps in a transaction
-- of its own, so that lock is held for the moment of the change, not for a claim.
create or replace function fairqueue.quanta_stamped(
    p_type text,
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    stamped fairqueue.type_quanta;
    names text[];
    quanta integer[];
begin
    perform fairqueue.door_quanta_arguments(p_plan_names, p_plan_quanta, p_default_quantum);
    select m.names, m.quanta into names, quanta
      from fairqueue.quanta_map(p_plan_names, p_plan_quanta, p_default_quantum) m;
    select * into stamped from fairqueue.type_quanta q where q.type = p_type;
    if not found then
        stamped := row(p_type, 1, '{}', '{}');
    end if;
    if stamped.quantum = p_default_quantum and stamped.plan_names = names
       and stamped.plan_quanta = quanta then
        return;
    end if;
    lock table fairqueue.served in share row exclusive mode;
    insert into fairqueue.type_quanta as q (type, quantum, plan_names, plan_quanta)
    values (p_type, p_default_quantum, names, quanta)
        on conflict (type) do update
       set quantum = excluded.quantum, plan_names = excluded.plan_names,
           plan_quanta = excluded.plan_quanta;
    update fairqueue.served s set quantum = fairqueue.standing_quantum(s.type, s.plan)
     where s.type = p_type and s.quantum <> fairqueue.standing_quantum(s.type, s.plan);
end $$;

alter function fairqueue.quanta_stamped(text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.quanta_stamped(text, text[], integer[], integer)
    from public, fairqueue_app;
grant execute on function fairqueue.quanta_stamped(text, text[], integer[], integer)
    to fairqueue_app;

-- Whether any job of the type could be claimed now: a due pending job, or a running one whose
-- lease expired before its last attempt, in a group that is not paused. One branch per status,
-- so the planner estimates each from its own partial index instead of misjudging the two
-- together as one filter.
create or replace function fairqueue.has_claimable(p_type text) returns boolean
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select exists (
    select 1
      from fairqueue.jobs j
      left join fairqueue.groups g on g.key = j.group_key
     where j.type = p_type and j.status = 'pending' and j.run_after <= now()
       and (g.status is null or g.status = 'active')
) or exists (
    select 1
      from fairqueue.jobs j
      left join fairqueue.groups g on g.key = j.group_key
     where j.type = p_type and j.status = 'running' and j.run_after <= now()
       and j.lease_until < now() and j.attempts < j.max_attempts
       and (g.status is null or g.status = 'active')
)
$$;

alter function fairqueue.has_claimable(text) owner to fairqueue_owner;
revoke all on function fairqueue.has_claimable(text) from public, fairqueue_app;
grant execute on function fairqueue.has_claimable(text) to fairqueue_app;

-- What a claim of p_type needs done first, in a transaction of its own (an autocommit caller's
-- one statement): fresh statistics after a bulk enqueue (sql/functions/statistics.sql), then the
-- served window's edge moved up to a day ago when it is a second or more stale
-- (expire_served_when_stale, sql/order/served.sql), then the type's quanta stamped on its
-- standings when they changed (quanta_stamped above). Each works through the owner's doors;
-- the ANALYZE goes first, so the expiry's locks are held only for the moment before the commit.
-- One round trip before each claim, not two.
create or replace function fairqueue.ready_for_claim(
    p_type text,
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.analyze_when_stale();
    perform fairqueue.expire_served_when_stale();
    perform fairqueue.quanta_stamped(p_type, p_plan_names, p_plan_quanta, p_default_quantum);
end $$;
alter function fairqueue.ready_for_claim(text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.ready_for_claim(text, text[], integer[], integer)
    from public, fairqueue_app;
grant execute on function fairqueue.ready_for_claim(text, text[], integer[], integer)
    to fairqueue_app;
