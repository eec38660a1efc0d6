-- What an operator asks about jobs across tenants: which jobs match (`fairqueue jobs list`), and
-- where a waiting job's group stands in its type's fair order (`fairqueue jobs show`). Both hand
-- back ids, tenants, counts and standings, never a payload; the jobs themselves are read again
-- under each one's tenant clamp.

-- Whether a job matches the filters an operator gave (null: any). The one spelling of them, for
-- both of find_jobs_unchecked's statements; no SET clause, so that it is inlined there.
create or replace function fairqueue.job_matches(
    p_status text, p_type text, p_tenant_id text, p_group_id text,
    p_want_status text, p_want_type text, p_want_tenant_id text, p_want_group_id text
) returns boolean
language sql immutable
as $$
select (p_want_status is null or p_status = p_want_status)
   and (p_want_type is null or p_type = p_want_type)
   and (p_want_tenant_id is null or p_tenant_id = p_want_tenant_id)
   and (p_want_group_id is null or p_group_id = p_want_group_id)
$$;

alter function fairqueue.job_matches(text, text, text, text, text, text, text, text)
    owner to fairqueue_owner;
revoke all on function fairqueue.job_matches(text, text, text, text, text, text, text, text)
    from public, fairqueue_app;

-- The jobs that match every filter given (null: any), newest first: ids and tenants. Jobs asked
-- for by id are found through the id indexes, the others by walking the jobs newest first: one
-- statement for both ("ids is null or id = any(ids)") walked the whole history for one id, 380
-- ms at a million finished jobs, and a union of the two lost the walk's order for the listing.
create or replace function fairqueue.find_jobs_unchecked(
    p_ids uuid[], p_status text, p_type text, p_tenant_id text, p_group_id text,
    p_limit integer
) returns table (id uuid, tenant_id text)
language plpgsql stable set search_path = pg_catalog, pg_temp
as $$
begin
    if p_ids is not null then
        return query
        select j.id, j.tenant_id
          from fairqueue.all_jobs j
         where j.id = any(p_ids)
           and fairqueue.job_matches(j.status, j.type, j.tenant_id, j.group_id, p_status,
                                     p_type, p_tenant_id, p_group_id)
         order by j.created_at desc, j.id desc
         limit p_limit;
    else
        return query
        select j.id, j.tenant_id
          from fairqueue.all_jobs j
         where fairqueue.job_matches(j.status, j.type, j.tenant_id, j.group_id, p_status,
                                     p_type, p_tenant_id, p_group_id)
         order by j.created_at desc, j.id desc
         limit p_limit;
    end if;
end $$;

alter function fairqueue.find_jobs_unchecked(uuid[], text, text, text, text, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.find_jobs_unchecked(uuid[], text, text, text, text, integer)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs find_jobs_unchecked as the owner.
create or replace function fairqueue.find_jobs(
    p_ids uuid[], p_status text, p_type text, p_tenant_id text, p_group_id text,
    p_limit integer
) returns table (id uuid, tenant_id text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('find_jobs: limit must be from 1 to 10000, got %s', p_limit));
select fairqueue.door_argument(
    p_status is null
    or p_status in ('queued', 'pending', 'running', 'done', 'failed', 'cancelled'),
    format('find_jobs: unknown status %L', p_status));
select * from fairqueue.find_jobs_unchecked(p_ids, p_status, p_type, p_tenant_id, p_group_id,
                                            p_limit);
$$;

alter function fairqueue.find_jobs(uuid[], text, text, text, text, integer) owner to fairqueue_owner;
revoke all on function fairqueue.find_jobs(uuid[], text, text, text, text, integer)
    from public, fairqueue_app;
grant execute on function fairqueue.find_jobs(uuid[], text, text, text, text, integer) to fairqueue_app;

-- A group's place in its type's group order (plan priority, fewest whole quanta served, oldest
-- head) and the standings of the p_ahead groups just before it, nearest first, the group's own
-- row first of all. place counts the groups ahead. No row when the group has no due job to offer
-- or is paused. Plans and served counts only: no key, no id of another group.
--
-- Read from the standing index plan by plan, as the claim reads it: the place counts every
-- standing of a higher plan and those of its own priority before it in the index, and the
-- nearest are the last p_ahead of each such plan before it, merged. Ranking every standing of
-- the type instead cost a sort of all of them (140 ms at 100,000 groups).
create or replace function fairqueue.group_standing_unchecked(
    p_type text,
    p_group_key text,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_ahead integer
) returns table (place bigint, own boolean, plan text, served bigint,
                 oldest_created_at timestamptz)
language sql stable set search_path = pg_catalog, pg_temp
as $$
-- The group's own standing, with its priority.
with own as (
    select s.plan, s.n, s.n / s.quantum as level, s.head_created_at, s.head_id,
           fairqueue.plan_priority(s.plan, p_plan_names, p_plan_priorities, p_default_priority)
               as priority
      from fairqueue.served s
     where s.type = p_type and s.group_key = p_group_key and s.head_id is not null
       and not s.paused
),
-- The plans with standing groups (a skip scan of the index), those at or above its priority.
plans as (
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
    select p.plan, fairqueue.plan_priority(p.plan, p_plan_names, p_plan_priorities,
                                           p_default_priority) as priority
      from present p, own o
     where p.plan is not null
       and fairqueue.plan_priority(p.plan, p_plan_names, p_plan_priorities,
                                   p_default_priority) >= o.priority
),
-- Each such plan's standings ahead of the group: all of a higher plan's, and those of its own
-- priority before it in the index order; how many, and the last p_ahead of them.
ahead as (
    select l.plan, l.priority, c.before
      from plans l, own o
     cross join lateral (
         select count(*) as before
           from fairqueue.served s
          where s.type = p_type and s.plan = l.plan and s.head_id is not null and not s.paused
            and l.priority > o.priority
         union all
         select count(*)
           from fairqueue.served s
          where s.type = p_type and s.plan = l.plan and s.head_id is not null and not s.paused
            and l.priority = o.priority
            and (s.n / s.quantum, s.head_created_at, s.head_id)
                < (o.level, o.head_created_at, o.head_id)) c
),
nearest as (
    select x.plan, x.n, x.head_created_at,
           row_number() over (order by l.priority, x.level desc, x.head_created_at desc,
                                       x.head_id desc) as distance
      from plans l, own o
     cross join lateral (
         (select s.plan, s.n, s.n / s.quantum as level, s.head_created_at, s.head_id
            from fairqueue.served s
           where s.type = p_type and s.plan = l.plan and s.head_id is not null and not s.paused
             and l.priority > o.priority
           order by s.n / s.quantum desc, s.head_created_at desc, s.head_id desc
           limit p_ahead)
         union all
         (select s.plan, s.n, s.n / s.quantum, s.head_created_at, s.head_id
            from fairqueue.served s
           where s.type = p_type and s.plan = l.plan and s.head_id is not null and not s.paused
             and l.priority = o.priority
             and (s.n / s.quantum, s.head_created_at, s.head_id)
                 < (o.level, o.head_created_at, o.head_id)
           order by s.n / s.quantum desc, s.head_created_at desc, s.head_id desc
           limit p_ahead)) x
),
-- The group's place: every standing ahead of it.
mine as (
    select coalesce(sum(a.before), 0)::bigint as place from ahead a
)
select m.place, true, o.plan, o.n, o.head_created_at
  from own o, mine m
union all
select m.place - n.distance, false, n.plan, n.n, n.head_created_at
  from nearest n, mine m
 where n.distance <= p_ahead
 order by 1 desc
$$;

alter function fairqueue.group_standing_unchecked(text, text, text[], integer[], integer, integer)
    owner to fairqueue_owner;
revoke all on function
    fairqueue.group_standing_unchecked(text, text, text[], integer[], integer, integer)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs group_standing_unchecked as the owner.
create or replace function fairqueue.group_standing(
    p_type text,
    p_group_key text,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_ahead integer
) returns table (place bigint, own boolean, plan text, served bigint,
                 oldest_created_at timestamptz)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_standing_arguments('group_standing', p_ahead, p_plan_names, p_plan_priorities);
select * from fairqueue.group_standing_unchecked(p_type, p_group_key, p_plan_names,
                                                 p_plan_priorities, p_default_priority, p_ahead);
$$;

alter function fairqueue.group_standing(text, text, text[], integer[], integer, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.group_standing(text, text, text[], integer[], integer, integer)
    from public, fairqueue_app;
grant execute on function
    fairqueue.group_standing(text, text, text[], integer[], integer, integer) to fairqueue_app;

-- The tenant level's place of a waiting job (Stage(fair_share="tenant")): its tenant's place among
-- the type's tenants, ranked as claim_by_tenant ranks them (plan priority, the fewest whole quanta
-- served, by the quantum the type's tenant standings carry, 1 before a claim by tenant listed it,
-- then its best group's head), with the standings of the p_ahead tenants just before it; and, on
-- its own row, how many of its tenant's groups come before its group. Read from the groups' rows
-- (tenant_standings_from_groups, which a listing builds the tenant standings from), not from the
-- tenant standings, which only a claim folds.
create or replace function fairqueue.tenant_standing_unchecked(
    p_type text,
    p_group_key text,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_ahead integer
) returns table (place bigint, own boolean, plan text, served bigint,
                 oldest_created_at timestamptz, groups_ahead bigint)
language sql stable set search_path = pg_catalog, pg_temp
as $$
-- The tenants with a group to offer, in the claim's order: the columns it walks the tenant
-- standings' index by (sql/migrations/0021_tenant_standings.sql), each plan ranked by its priority.
with ranked as (
    select t.tenant_key, t.plan, t.n as served, t.best_created_at,
           row_number() over (
               order by fairqueue.plan_priority(t.plan, p_plan_names, p_plan_priorities,
                                                p_default_priority) desc,
                        t.n / fairqueue.tenant_quantum(p_type, t.plan),
                        t.best_n, t.best_created_at, t.best_id) - 1 as place
      from fairqueue.tenant_standings_from_groups(p_type) t
     where t.best_id is not null
),
-- The job's own tenant, whose place the answer is counted back from.
mine as (
    select r.place from ranked r
     where r.tenant_key = fairqueue.group_tenant_key(p_group_key)
),
-- The groups of that tenant ahead of the job's, in the order within a tenant.
within_tenant as (
    select count(*) as ahead
      from fairqueue.served g
      join fairqueue.served s
        on s.type = g.type and s.tenant_key = g.tenant_key
       and s.head_id is not null and not s.paused
       and (s.n, s.head_created_at, s.head_id) < (g.n, g.head_created_at, g.head_id)
     where g.type = p_type and g.group_key = p_group_key
)
-- The tenant's own place is read once, as in group_standing_unchecked.
select r.place, r.tenant_key = m.tenant_key, r.plan, r.served, r.best_created_at,
       case when r.tenant_key = m.tenant_key then (select w.ahead from within_tenant w) end
  from ranked r
 cross join (select fairqueue.group_tenant_key(p_group_key) as tenant_key) m
 where r.place between (select o.place from mine o) - p_ahead and (select o.place from mine o)
 order by r.place desc
$$;

alter function fairqueue.tenant_standing_unchecked(text, text, text[], integer[], integer, integer)
    owner to fairqueue_owner;
revoke all on function
    fairqueue.tenant_standing_unchecked(text, text, text[], integer[], integer, integer)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs tenant_standing_unchecked as the owner.
create or replace function fairqueue.tenant_standing(
    p_type text,
    p_group_key text,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer,
    p_ahead integer
) returns table (place bigint, own boolean, plan text, served bigint,
                 oldest_created_at timestamptz, groups_ahead bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_standing_arguments('tenant_standing', p_ahead, p_plan_names, p_plan_priorities);
select * from fairqueue.tenant_standing_unchecked(p_type, p_group_key, p_plan_names,
                                                  p_plan_priorities, p_default_priority, p_ahead);
$$;

alter function fairqueue.tenant_standing(text, text, text[], integer[], integer, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.tenant_standing(text, text, text[], integer[], integer, integer)
    from public, fairqueue_app;
grant execute on function
    fairqueue.tenant_standing(text, text, text[], integer[], integer, integer) to fairqueue_app;
