-- The fair claim at the tenant level (Stage(fair_share="tenant")), the one definition of that
-- order: plan priority, then the tenant served least of this type in the last day, then within
-- the tenant the group served least, then the oldest job; each pick counts for the next at both
-- levels. A batch of N is exactly the first N picks of that order made one at a time, less the
-- jobs another transaction holds.
--
-- A tenant's own picks, in the order it makes them, are the group-level order of its groups
-- alone, and its j-th pick stands at (its served count + j, then that pick's place among its
-- groups). Every tenant's picks rise in that key, so taking the picks one at a time is merging
-- the tenants' sequences, and a batch is the N smallest keys of the merge. The first N tenants
-- (by their first pick, which their standing carries) hold all of them. Each of those can take
-- at most as many picks as the bound below allows (the tenants at or below each served count
-- take at least one pick each before it); within a tenant the same bound over its groups says
-- how many jobs each group can give. Those jobs are ranked within their tenants, then all
-- together, and locked in that order until the batch is full.
--
-- Claims by tenant of one type take turns (a transaction lock per type): the tenant standings
-- are written by these claims alone, from the log the triggers on served append to, so the
-- writers of groups never wait on a tenant's row.
create or replace function fairqueue.claim_by_tenant_unchecked(
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
    stale text[];
    looked_again boolean := false;
    claimed_ids uuid[];
    claimed_tenants text[];
begin
    perform fairqueue.lock_tenant_claims(array[p_type]);
    perform fairqueue.tenant_level_listed(p_type);

    perform fairqueue.stand_woken_groups(p_type);

    loop
        perform fairqueue.tenant_standings_fold(p_type);

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
        ),
        -- The first p_batch tenants by their first pick, over every plan.
        tenants as (
            select x.tenant_key, x.n,
                   coalesce(p_plan_priorities[array_position(p_plan_names, p.plan)],
                            p_default_priority) as priority
              from present p
              cross join lateral (
                  select t.tenant_key, t.n, t.best_n, t.best_created_at, t.best_id
                    from fairqueue.tenant_standings t
                   where t.type = p_type and t.plan = p.plan and t.best_id is not null
                   order by t.n, t.best_n, t.best_created_at, t.best_id
                   limit p_batch) x
             where p.plan is not null
             order by 3 desc, x.n, x.best_n, x.best_created_at, x.best_id
             limit p_batch
        ),
        -- How many picks each tenant can take: its pick j+1 stands at n + j, behind every tenant of
        -- a higher priority and every tenant of its own whose count is lower, and behind its own
        -- first j picks. The levels are the (priority, n) places of the tenants, with how many
        -- stand at or before each.
        tenant_levels as (
            select l.priority, l.n,
                   (sum(l.heads) over (order by l.priority desc, l.n))::bigint as heads_up_to,
                   lead(l.n) over (partition by l.priority order by l.n) as next_n
              from (select t.priority, t.n, count(*) as heads from tenants t group by 1, 2) l
        ),
        tenant_reach as (
            select t.tenant_key, t.n, t.priority,
                   1 + coalesce(max(least(coalesce(l.next_n - t.n, p_batch),
                                          p_batch - l.heads_up_to))
                                  filter (where p_batch - l.heads_up_to >= l.n - t.n + 1),
                                0) as picks
              from tenants t
              join tenant_levels l on l.priority = t.priority and l.n >= t.n
             group by 1, 2, 3
        ),
        -- Each of those tenants' first groups, as many as it can take picks.
        tenant_groups as (
            select r.tenant_key, r.n as tenant_n, r.priority, r.picks, g.group_key, g.n,
                   g.head_created_at, g.head_id
              from tenant_reach r
              cross join lateral (
                  select s.group_key, s.n, s.head_created_at, s.head_id
                    from fairqueue.served s
                   where s.type = p_type and s.tenant_key = r.tenant_key
                     and s.head_id is not null and not s.paused
                   order by s.n, s.head_created_at, s.head_id
                   limit r.picks) g
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
        group_reach as (
            select g.tenant_key, g.tenant_n, g.priority, g.picks, g.group_key, g.n,
                   g.head_created_at, g.head_id,
                   1 + coalesce(max(least(coalesce(l.next_n - g.n, g.picks),
                                          g.picks - l.heads_up_to))
                                  filter (where g.picks - l.heads_up_to >= l.n - g.n + 1),
                                0) as jobs
              from tenant_groups g
              join group_levels l on l.tenant_key = g.tenant_key and l.n >= g.n
             group by 1, 2, 3, 4, 5, 6, 7, 8
        ),
        -- Each group's oldest due jobs, as many as it can give, from its head on (see
        -- claim_firsts); a paused group gives none.
        offered as (
            select j.id, j.created_at, r.priority, r.tenant_n, r.picks, r.tenant_key,
                   r.n + row_number() over (partition by r.group_key
                                            order by j.created_at, j.id) as group_place
              from group_reach r
              cross join lateral (
                  select j.id, j.created_at
                    from fairqueue.jobs j
                   where j.type = p_type and j.status = 'pending'
                     and j.group_key = r.group_key and j.run_after <= now()
                     and (j.created_at, j.id) >= (r.head_created_at, r.head_id)
                     and not exists (select 1 from fairqueue.groups g
                                      where g.key = r.group_key and g.status = 'paused')
                   order by j.type, j.group_key, j.created_at, j.id
                   limit r.jobs) j
        ),
        ranked as (
            select o.id, o.created_at, o.priority, o.group_place, o.picks,
                   row_number() over (partition by o.tenant_key
                                      order by o.group_place, o.created_at, o.id) as pick,
                   o.tenant_n
              from offered o
        ),
        offers (id, priority, tenant_place, group_place, created_at) as (
            select r.id, r.priority, r.tenant_n + r.pick, r.group_place, r.created_at
              from ranked r
             where r.pick <= r.picks
            union all
            -- Jobs whose claimer died before their last attempt: found by the lease index, few.
            -- They stand after their tenant's and their group's counts, which count them already.
            select j.id,
                   coalesce(p_plan_priorities[array_position(p_plan_names, t.plan)],
                            p_default_priority),
                   coalesce(ts.n, 0)
                       + row_number() over (partition by fairqueue.group_tenant_key(j.group_key)
                                            order by j.created_at, j.id),
                   coalesce(s.n, 0) + row_number() over (partition by j.group_key
                                                         order by j.created_at, j.id),
                   j.created_at
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
            select l.id
              from (select o.id, o.priority, o.tenant_place, o.group_place, o.created_at
                      from offers o
                     order by o.priority desc, o.tenant_place, o.group_place, o.created_at, o.id) o
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
        claimed as (
            update fairqueue.jobs j
               set status = 'running',
                   attempts = j.attempts + 1,
                   locked_at = now(),
                   lease_until = now() + p_lease_s * interval '1 second',
                   locked_by = p_locked_by,
                   run_id = p_run_id
             where j.id = any(array(select p.id from picked p))
            returning j.id, j.tenant_id
        )
        select array_agg(c.id), array_agg(c.tenant_id) into claimed_ids, claimed_tenants
          from claimed c;

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
    text[], integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim_by_tenant_unchecked(text, integer, double precision, text,
    uuid, text[], integer[], integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs claim_by_tenant_unchecked as the owner.
create or replace function fairqueue.claim_by_tenant(
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
select fairqueue.door_argument(p_batch between 1 and 1000,
    format('claim: batch must be from 1 to 1000, got %s', p_batch));
select fairqueue.door_argument(p_lease_s > 0 and p_lease_s <= 86400,
    format('claim: lease_s must be over 0 and at most 86400 (a day), got %s', p_lease_s));
select fairqueue.door_argument(p_locked_by <> '' and length(p_locked_by) <= 200,
    'claim: locked_by must be 1 to 200 characters');
select * from fairqueue.claim_by_tenant_unchecked(p_type, p_batch, p_lease_s, p_locked_by,
    p_run_id, p_plan_names, p_plan_priorities, p_default_priority);
$$;

alter function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid, text[],
    integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer) from public, fairqueue_app;
grant execute on function fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer) to fairqueue_app;
