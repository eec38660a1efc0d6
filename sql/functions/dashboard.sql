-- What the operators' dashboard (fairqueue.dashboard) shows of the fair order across tenants:
-- tenant ids, plans, group keys and counts from the served standings, and credit sums; never a
-- payload. Each door checks its limit, then runs its _unchecked body as the owner.

-- Each tenant's service in the last day, its groups, and how many of them wait or are paused:
-- the most served first. A row per tenant; the jobs with no tenant are the row whose id is null.
create or replace function fairqueue.dashboard_tenants_unchecked(p_limit integer)
returns table (tenant_id text, plan text, groups bigint, served numeric, waiting bigint,
               paused bigint)
language sql stable set search_path = pg_catalog, pg_temp
as $$
-- One row per group, its types' counts added up.
with per_group as (
    select s.group_key, min(s.tenant_id) as tenant_id, min(s.plan) as plan, sum(s.n) as served,
           bool_or(s.head_id is not null and not s.paused) as waiting, bool_or(s.paused) as paused
      from fairqueue.served s
     group by s.group_key
)
select g.tenant_id, min(g.plan), count(*), sum(g.served), count(*) filter (where g.waiting),
       count(*) filter (where g.paused)
  from per_group g
 group by g.tenant_id
 order by sum(g.served) desc, g.tenant_id nulls first
 limit p_limit
$$;

alter function fairqueue.dashboard_tenants_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_tenants_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_tenants(p_limit integer)
returns table (tenant_id text, plan text, groups bigint, served numeric, waiting bigint,
               paused bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_tenants: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_tenants_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_tenants(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_tenants(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_tenants(integer) to fairqueue_app;

-- The day's service as one row: how many tenants, groups and plans had work, the jobs served,
-- and Jain's index of the service (1 when every one got the same, 1/n when one got it all)
-- between tenants and between groups, each counting only those served or waiting. Counts only.
create or replace function fairqueue.dashboard_fairness()
returns table (tenants bigint, groups bigint, served numeric, waiting bigint,
               tenant_index double precision, group_index double precision)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
-- The groups with work in the day, their types' counts added up.
with per_group as (
    select s.group_key, min(s.tenant_key) as tenant_key, sum(s.n)::double precision as served,
           bool_or(s.head_id is not null and not s.paused) as waiting
      from fairqueue.served s
     where s.n > 0 or s.head_id is not null
     group by s.group_key
),
-- The same, added up per tenant.
per_tenant as (
    select g.tenant_key, sum(g.served) as served from per_group g group by g.tenant_key
)
select (select count(*) from per_tenant),
       count(*),
       coalesce(sum(g.served), 0)::numeric,
       count(*) filter (where g.waiting),
       (select sum(t.served) ^ 2 / nullif(count(*) * sum(t.served ^ 2), 0) from per_tenant t),
       sum(g.served) ^ 2 / nullif(count(*) * sum(g.served ^ 2), 0)
  from per_group g
$$;

alter function fairqueue.dashboard_fairness() owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_fairness() from public, fairqueue_app;
grant execute on function fairqueue.dashboard_fairness() to fairqueue_app;

-- Each plan's share of the day's service: its tenants, groups, jobs served and groups waiting.
create or replace function fairqueue.dashboard_plans()
returns table (plan text, tenants bigint, groups bigint, served numeric, waiting bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select s.plan, count(distinct s.tenant_key), count(distinct s.group_key), sum(s.n),
       count(distinct s.group_key) filter (where s.head_id is not null and not s.paused)
  from fairqueue.served s
 group by s.plan
 order by s.plan
$$;

alter function fairqueue.dashboard_plans() owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_plans() from public, fairqueue_app;
grant execute on function fairqueue.dashboard_plans() to fairqueue_app;

-- The groups whose oldest due job has waited longest, paused ones included: type, key, plan,
-- the day's count, whether paused, and the job at their head (its own page says why it waits).
create or replace function fairqueue.dashboard_waiting_unchecked(p_limit integer)
returns table (type text, group_key text, plan text, served bigint, paused boolean,
               head_id uuid, head_created_at timestamptz)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select s.type, s.group_key, s.plan, s.n, s.paused, s.head_id, s.head_created_at
  from fairqueue.served s
 where s.head_id is not null
 order by s.head_created_at, s.type, s.group_key
 limit p_limit
$$;

alter function fairqueue.dashboard_waiting_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_waiting_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_waiting(p_limit integer)
returns table (type text, group_key text, plan text, served bigint, paused boolean,
               head_id uuid, head_created_at timestamptz)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_waiting: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_waiting_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_waiting(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_waiting(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_waiting(integer) to fairqueue_app;

-- Groups across tenants, the paused ones first, then the most served: key, tenant, the day's
-- count over its types, whether it has due work and whether it is paused.
create or replace function fairqueue.dashboard_groups_unchecked(p_limit integer)
returns table (group_key text, tenant_id text, served numeric, waiting boolean, paused boolean)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select s.group_key, min(s.tenant_id), sum(s.n), bool_or(s.head_id is not null),
       bool_or(s.paused)
  from fairqueue.served s
 group by s.group_key
 order by bool_or(s.paused) desc, sum(s.n) desc, s.group_key
 limit p_limit
$$;

alter function fairqueue.dashboard_groups_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_groups_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_groups(p_limit integer)
returns table (group_key text, tenant_id text, served numeric, waiting boolean, paused boolean)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_groups: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_groups_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_groups(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_groups(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_groups(integer) to fairqueue_app;

-- Each tenant's credit balance and what made it: granted, spent (debits, as a positive sum)
-- and refunded; by tenant id.
create or replace function fairqueue.dashboard_balances_unchecked(p_limit integer)
returns table (tenant_id text, balance numeric, granted numeric, spent numeric,
               refunded numeric)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select c.tenant_id, sum(c.amount),
       coalesce(sum(c.amount) filter (where c.kind = 'grant'), 0),
       coalesce(-sum(c.amount) filter (where c.kind = 'debit'), 0),
       coalesce(sum(c.amount) filter (where c.kind = 'refund'), 0)
  from fairqueue.credits c
 group by c.tenant_id
 order by c.tenant_id
 limit p_limit
$$;

alter function fairqueue.dashboard_balances_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_balances_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_balances(p_limit integer)
returns table (tenant_id text, balance numeric, granted numeric, spent numeric,
               refunded numeric)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_balances: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_balances_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_balances(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_balances(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_balances(integer) to fairqueue_app;
