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

-- The level at which queues whose first picks stand at the given served counts fill a batch,
-- if each had picks enough, for each set of queues (p_keys): the least x with
-- sum(x - served + 1) >= batch over the set's counts at most x (a queue at count c gives one pick
-- at each of c, c + 1, ..., x), found between each count and the next. Both claims offer their
-- top priority's queues only as deep as this level: the group claim its groups (one set), the
-- tenant claim its tenants and then each tenant's groups (a set a tenant). No SET clause, so that
-- the planner inlines it into the claims' statements (which run with the owner's search path):
-- called as a function of its own it cost 0.2-0.6 ms a claim.
create or replace function fairqueue.fill_levels(
    p_keys text[],
    p_batches bigint[],
    p_served bigint[]
) returns table (key text, level bigint)
language sql immutable
as $$
select w.key, min(w.level)
  from (select c.key,
               greatest(c.served,
                        ceil((c.batch + c.served_up_to)::numeric / c.queues_up_to)::bigint - 1)
                   as level,
               c.next_served
          from (select s.key, s.batch, s.served,
                       sum(s.queues) over (partition by s.key order by s.served) as queues_up_to,
                       sum(s.queues * s.served) over (partition by s.key order by s.served)
                           as served_up_to,
                       lead(s.served) over (partition by s.key order by s.served) as next_served
                  from (select u.key, max(u.batch) as batch, u.served, count(*) as queues
                          from unnest(p_keys, p_batches, p_served) as u (key, batch, served)
                         group by u.key, u.served) s) c) w
 where w.next_served is null or w.level < w.next_served
 group by w.key
$$;

alter function fairqueue.fill_levels(text[], bigint[], bigint[]) owner to fairqueue_owner;
revoke all on function fairqueue.fill_levels(text[], bigint[], bigint[])
    from public, fairqueue_app;

-- The first job of each of the best groups that offer one, for the claim below: the groups come
-- from the standing index (sql/migrations/0019_standings.sql), best first, plan by plan, and
-- each offers its oldest due job that no one else holds (skip locked). With p_hold_groups the
-- claim also locks each group's standing (skip locked), so concurrent claimers take different
-- groups and never wait for one another; a group another claimer holds, or whose due jobs are
-- all held, is passed over and the claim reads further down the index. Without it (when every
-- group with work is held) it takes the jobs nobody holds in held groups, and waits for their
-- standings when it writes them: it holds no standing itself, so that wait cannot close a
-- circle. Each first job comes as a fairqueue.ranked_job
-- (sql/migrations/0044_order_definitions_folded.sql), with what the claim ranks it by (its
-- group's served count and plan) read where it was found, so the claim looks up neither again;
-- in the order the jobs were taken.
create or replace function fairqueue.claim_firsts(
    p_type text,
    p_batch integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_hold_groups boolean
) returns fairqueue.ranked_job[]
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
#variable_conflict use_column
declare
    level record;
    candidates text[];
    last_n bigint;
    last_at timestamptz;
    last_id uuid;
    need integer;
    -- The standings of the candidates a pass holds, each with its group's head as its job.
    heads fairqueue.ranked_job[];
    -- The first jobs a pass found from those heads, and all the passes took.
    found_jobs fairqueue.ranked_job[];
    taken fairqueue.ranked_job[] := '{}';
    stale text[];
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
        last_n := -9223372036854775808;
        last_at := '-infinity';
        last_id := '00000000-0000-0000-0000-000000000000';
        loop
            need := p_batch - cardinality(taken);
            exit when need <= 0;
            select array_agg(c.group_key order by c.n, c.head_created_at, c.head_id),
                   (array_agg(c.n order by c.n desc, c.head_created_at desc, c.head_id desc))[1],
                   (array_agg(c.head_created_at
                              order by c.n desc, c.head_created_at desc, c.head_id desc))[1],
                   (array_agg(c.head_id
                              order by c.n desc, c.head_created_at desc, c.head_id desc))[1]
              into candidates, last_n, last_at, last_id
              from (select x.group_key, x.n, x.head_created_at, x.head_id
                      from unnest(level.plans) as l (plan)
                      cross join lateral (
                          select s.group_key, s.n, s.head_created_at, s.head_id
                            from fairqueue.served s
                           where s.type = p_type and s.plan = l.plan
                             and s.head_id is not null and not s.paused
                             and (s.n, s.head_created_at, s.head_id) > (last_n, last_at, last_id)
                           order by s.n, s.head_created_at, s.head_id
                           limit need) x
                     order by x.n, x.head_created_at, x.head_id
                     limit need) c;
            exit when candidates is null;
            if p_hold_groups then
                select array_agg(row(h.group_key, h.n, h.plan, h.head_created_at,
                                     h.head_id)::fairqueue.ranked_job)
                  into heads
                  from unnest(candidates) as k (group_key)
                  cross join lateral (
                      select s.group_key, s.n, s.plan, s.head_created_at, s.head_id
                        from fairqueue.served s
                       where s.type = p_type and s.group_key = k.group_key
                         and not exists (select 1 from unnest(taken) t
                                          where t.group_key = k.group_key)
                         and s.head_id is not null and not s.paused
                         for no key update skip locked) h;
            else
                select array_agg(row(s.group_key, s.n, s.plan, s.head_created_at,
                                     s.head_id)::fairqueue.ranked_job)
                  into heads
                  from unnest(candidates) as k (group_key)
                  cross join lateral (
                      select s.group_key, s.n, s.plan, s.head_created_at, s.head_id
                        from fairqueue.served s
                       where s.type = p_type and s.group_key = k.group_key
                       limit 1) s;
            end if;
            -- Each group's oldest due job that no one holds, from its head on; a paused group
            -- offers none. The jobs before the head are gone, and the index keeps their entries
            -- until a vacuum: read from the start, a group drained of 50,000 jobs since the last
            -- vacuum costs 0.65 ms a read here instead of 0.05. A job before the head, which an
            -- enqueue holding the standing committed after a claim set the head without seeing
            -- it, is found by the next claim's head, which does not read from a head set so
            -- (recompute_heads).
            select array_agg(row(f.group_key, k.served, k.plan, f.created_at,
                                 f.id)::fairqueue.ranked_job)
              into found_jobs
              from unnest(heads) as k
              cross join lateral (
                  select j.group_key, j.id, j.created_at
                    from fairqueue.jobs j
                   where j.type = p_type and j.status = 'pending'
                     and j.group_key = k.group_key and j.run_after <= now()
                     and (j.created_at, j.id)
                         >= (coalesce(k.created_at, '-infinity'),
                             coalesce(k.id, '00000000-0000-0000-0000-000000000000'))
                     and not exists (select 1 from fairqueue.groups g
                                      where g.key = k.group_key and g.status = 'paused')
                   order by j.type, j.group_key, j.created_at, j.id
                   limit 1
                     for update of j skip locked) f;
            taken := taken || coalesce(found_jobs, '{}');
            -- A group this claim holds that offered nothing although its head is not held
            -- either: its standing is wrong (its jobs changed in a way no trigger saw, such as a
            -- truncate, or it was paused since), so it stands again from its jobs.
            if p_hold_groups
               and cardinality(heads) > coalesce(cardinality(found_jobs), 0) then
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
            exit when cardinality(candidates) < need;
        end loop;
        exit when cardinality(taken) >= p_batch;
    end loop;
    return taken;
end $$;

alter function fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean)
    owner to fairqueue_owner;
revoke all on function fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean)
    from public, fairqueue_app;

-- The picks of a claim: the best p_batch of the jobs the first groups offer, locked in the
-- order's order (claim_unchecked below). Each of those groups offers its first job, which
-- claim_firsts locked, and more of its oldest due jobs after it; jobs whose lease expired before
-- their last attempt join them. The ids come in the order's order, with whether they are surely
-- the batch: no group that was allowed fewer jobs than it could take has its next job standing
-- before the batch's last pick.
--
-- How many a group could take at all: its job d+1 stands at served + d, behind every group of a
-- higher priority and every group of its own whose served count is lower, and behind its own
-- first d jobs. That bound counts only the first jobs of the others, so a group a few others
-- share the batch with is allowed nearly all of it: ten groups of the top plan ahead of ninety
-- others offered 2,700 jobs for a batch of 100. So when p_tight is set, the groups of the top
-- priority offer only as deep as they would reach if each had jobs enough (the level at which,
-- one job a level from each group's served count on, they fill the batch), one more for a pick
-- another claimer holds, and the groups below them their first job; the caller asks again
-- without p_tight when that is not surely the batch.
--
-- A group also offers at least a share of twice the batch when fewer groups than the batch
-- offer a first job, so that a claimer that overlaps another in the same groups finds spares.
create or replace function fairqueue.claim_picks(
    p_type text,
    p_batch integer,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_firsts fairqueue.ranked_job[],
    p_tight boolean
) returns table (ids uuid[], verified boolean)
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    return query
    -- The first jobs with their plans' priorities, which every step below ranks by.
    with firsts as (
        select f.id, f.created_at, f.group_key, f.served,
               fairqueue.plan_priority(f.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority) as priority
          from unnest(p_firsts) as f
    ),
    -- The (priority, served) places of the first jobs, with how many stand at or before each.
    levels as (
        select l.priority, l.served,
               (sum(l.heads) over (order by l.priority desc, l.served))::bigint as heads_up_to,
               lead(l.served) over (partition by l.priority order by l.served) as next_served
          from (select f.priority, f.served, count(*) as heads
                  from firsts f
                 group by 1, 2) l
    ),
    -- How many jobs each first group could take at all (the bound above): one, and as many more
    -- as the places at and after its own leave room for in the batch.
    reach as (
        select f.id, f.created_at, f.group_key, f.priority, f.served,
               1 + coalesce(max(least(coalesce(l.next_served - f.served, p_batch),
                                      p_batch - l.heads_up_to))
                              filter (where p_batch - l.heads_up_to >= l.served - f.served + 1),
                            0) as picks
          from firsts f
          join levels l on l.priority = f.priority and l.served >= f.served
         group by f.id, f.created_at, f.group_key, f.priority, f.served
    ),
    -- The least a group offers (a share of twice the batch when fewer groups than the batch
    -- offer a first job), and the top priority among the groups.
    share as (
        select case when count(*) >= p_batch then 1
                    else greatest(1, 2 * p_batch / greatest(count(*), 1)) end as per_group,
               max(r.priority) as top
          from reach r
    ),
    -- The level the top priority's groups fill the batch at.
    water as (
        select max(f.level) as level
          from (select array_agg(''::text) as keys, array_agg(p_batch::bigint) as batches,
                       array_agg(r.served) as served
                  from reach r, share
                 where r.priority = share.top) a
          cross join lateral fairqueue.fill_levels(a.keys, a.batches, a.served) f
    ),
    -- How deep each group offers: most is all it could take, take is what it offers in this
    -- pass, never less than the share (tight: the top priority's groups to one past the water
    -- level, the others their first job).
    allowed as (
        select r.id, r.created_at, r.group_key, r.priority, r.served,
               greatest(r.picks, share.per_group) as most,
               greatest(case when not p_tight then r.picks
                             when r.priority = share.top
                                 then least(r.picks, greatest(water.level - r.served + 2, 1))
                             else 1 end,
                        share.per_group) as take
          from reach r, share, water
    ),
    -- The jobs on offer, each at the served count it would be picked at: a group's first job
    -- (locked already: mine), then its next oldest due jobs, as many as it takes, and the jobs
    -- whose lease expired.
    offered as (
        select a.id, a.group_key, a.priority, a.served + 1 as served, a.created_at, true as mine
          from allowed a
        union all
        select c.id, a.group_key, a.priority,
               a.served + 1 + row_number() over (partition by a.group_key
                                                 order by c.created_at, c.id),
               c.created_at, false
          from allowed a
          cross join lateral (
              select j.id, j.created_at
                from fairqueue.jobs j
               where a.take > 1
                 and j.type = p_type and j.status = 'pending'
                 and j.group_key = a.group_key and j.run_after <= now()
                 and (j.created_at, j.id) > (a.created_at, a.id)
               order by j.type, j.group_key, j.created_at, j.id
               limit a.take - 1) c
        union all
        -- Jobs whose claimer died before their last attempt: found by the lease index, few, and
        -- all offered.
        select j.id, null,
               fairqueue.plan_priority(t.plan, p_plan_names, p_plan_priorities,
                                       p_default_priority),
               coalesce(s.n, 0) + row_number() over (partition by j.group_key
                                                     order by j.created_at, j.id),
               j.created_at, false
          from fairqueue.jobs j
          left join fairqueue.groups g on g.key = j.group_key
          left join fairqueue.tenants t on t.id = j.tenant_id
          left join fairqueue.served s on s.type = p_type and s.group_key = j.group_key
         where j.type = p_type and j.status = 'running' and j.lease_until < now()
           and j.run_after <= now() and j.attempts < j.max_attempts
           and (g.status is null or g.status = 'active')
    ),
    -- Locked in the order's order, passing over what another claimer holds, until the batch is
    -- full: nothing is locked that this claim does not take, beyond the first jobs, which are
    -- locked already.
    picked as (
        select o.id, o.priority, o.served, o.created_at
          from (select o.* from offered o
                 order by o.priority desc, o.served, o.created_at, o.id) o
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
        select p.priority, p.served, p.created_at, p.id, count(*) over () as picks
          from picked p
         order by p.priority, p.served desc, p.created_at desc, p.id desc
         limit 1
    ),
    -- The groups allowed fewer jobs than they could take that offered all they were allowed,
    -- with where their next job would stand.
    cut_short as (
        select a.priority, a.served + 1 + a.take as next_served, o.last_created_at, o.last_id
          from allowed a
          join (select o.group_key, count(*) as offered,
                       (array_agg(o.created_at order by o.served desc))[1] as last_created_at,
                       (array_agg(o.id order by o.served desc))[1] as last_id
                  from offered o
                 where o.group_key is not null
                 group by 1) o on o.group_key = a.group_key
         where a.take < a.most and o.offered = a.take
    )
    select array(select p.id from picked p
                  order by p.priority desc, p.served, p.created_at, p.id),
           not exists (
               select 1
                 from cut_short c
                 left join last_pick l on true
                where l.picks is distinct from p_batch::bigint
                   or not (c.priority < l.priority
                           or (c.priority = l.priority
                               and (c.next_served > l.served
                                    or (c.next_served = l.served
                                        and (c.last_created_at, c.last_id)
                                            >= (l.created_at, l.id))))));
end $$;

alter function fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean) owner to fairqueue_owner;
revoke all on function fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean) from public, fairqueue_app;

-- What a claim writes on each job it takes: running, one more attempt, a lease of p_lease_s and
-- its claimer. Both claims call it in the subtransaction that locked the rows (see
-- claim_unchecked); the ids and tenants come back as one row of arrays, in no order.
create or replace function fairqueue.take_claimed(
    p_ids uuid[],
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid
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
               run_id = p_run_id
         where j.id = any(p_ids)
        returning j.id, j.tenant_id
    )
    select array_agg(c.id), array_agg(c.tenant_id) from claimed c;
end $$;

alter function fairqueue.take_claimed(uuid[], double precision, text, uuid)
    owner to fairqueue_owner;
revoke all on function fairqueue.take_claimed(uuid[], double precision, text, uuid)
    from public, fairqueue_app;

-- The fair claim, the one definition of the order: plan priority, then the group served least
-- of this type in the last day (each job picked from a group in this batch counts as served, so
-- a batch interleaves groups), then the oldest job. A batch of N is exactly the first N picks of
-- that order made one at a time, less the groups and jobs another claimer holds.
--
-- The first p_batch groups that offer a job (claim_firsts) hold all the batch's picks: their
-- p_batch first jobs pick before any job of a group ranked below them. The picks are the best
-- p_batch of the jobs those groups offer (claim_picks).
create or replace function fairqueue.claim_unchecked(
    p_type text,
    p_batch integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer
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
                                             p_default_priority, hold);
            if hold and cardinality(firsts) = 0 then
                raise exception using errcode = 'FQ001';
            end if;
            select p.ids, p.verified into picked_ids, verified
              from fairqueue.claim_picks(p_type, p_batch, p_plan_names, p_plan_priorities,
                                         p_default_priority, firsts, tight) p;
            if tight and not verified then
                raise exception using errcode = 'FQ002';
            end if;
            select t.ids, t.tenant_ids into claimed_ids, claimed_tenants
              from fairqueue.take_claimed(picked_ids, p_lease_s, p_locked_by, p_run_id) t;
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
    integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs claim_unchecked as the owner.
create or replace function fairqueue.claim(
    p_type text,
    p_batch integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer
) returns table (id uuid, tenant_id text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_claim_arguments(p_batch, p_lease_s, p_locked_by);
select * from fairqueue.claim_unchecked(p_type, p_batch, p_lease_s, p_locked_by, p_run_id,
    p_plan_names, p_plan_priorities, p_default_priority);
$$;

alter function fairqueue.claim(text, integer, double precision, text, uuid, text[], integer[],
    integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer) from public, fairqueue_app;
grant execute on function fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer) to fairqueue_app;

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

-- What a claim needs done first, in a transaction of its own (an autocommit caller's one
-- statement): fresh statistics after a bulk enqueue (sql/functions/statistics.sql), then the
-- served window's edge moved up to a day ago when it is a second or more stale
-- (expire_served_when_stale, sql/order/served.sql). Each works through the owner's doors;
-- the ANALYZE goes first, so the expiry's locks are held only for the moment before the
-- commit. One round trip before each claim, not two.
create or replace function fairqueue.ready_for_claim() returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.analyze_when_stale();
    perform fairqueue.expire_served_when_stale();
end $$;
alter function fairqueue.ready_for_claim() owner to fairqueue_owner;
revoke all on function fairqueue.ready_for_claim() from public, fairqueue_app;
grant execute on function fairqueue.ready_for_claim() to fairqueue_app;
