-- What the operators' dashboard (fairqueue.dashboard) shows of the fair order across tenants:
-- tenant ids, plans, group keys and counts from the served standings, and credit sums; never a
-- payload. Each door checks its limit, then runs its _unchecked body as the owner.

-- Each job type's backlog, every tenant's: queued in lanes, due now, scheduled later, running,
-- running past its lease, and failed in the last day (in the hot table or moved to the finished
-- jobs' days, read through their index of failed jobs). Counts only.
create or replace function fairqueue.dashboard_backlog()
returns table (type text, queued bigint, due bigint, scheduled bigint, running bigint,
               stuck bigint, failed_today bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
-- The open jobs and those failed in the last day still in the hot table, per type.
with hot as (
    select j.type,
           count(*) filter (where j.status = 'queued') as queued,
           count(*) filter (where j.status = 'pending' and j.run_after <= now()) as due,
           count(*) filter (where j.status = 'pending' and j.run_after > now()) as scheduled,
           count(*) filter (where j.status = 'running' and j.lease_until >= now()) as running,
           count(*) filter (where j.status = 'running' and j.lease_until < now()) as stuck,
           count(*) filter (where j.status = 'failed'
                              and j.finished_at > now() - interval '1 day') as failed
      from fairqueue.jobs j
     where j.status in ('queued', 'pending', 'running', 'failed')
     group by j.type
),
-- The failed jobs of the last day that moved to the finished jobs' days, per type.
moved as (
    select f.type, count(*) as failed
      from fairqueue.finished_jobs f
     where f.status = 'failed' and f.finished_at > now() - interval '1 day'
     group by f.type
)
select coalesce(h.type, m.type), coalesce(h.queued, 0), coalesce(h.due, 0),
       coalesce(h.scheduled, 0), coalesce(h.running, 0), coalesce(h.stuck, 0),
       coalesce(h.failed, 0) + coalesce(m.failed, 0)
  from hot h
  full join moved m on m.type = h.type
 order by 1
$$;

alter function fairqueue.dashboard_backlog() owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_backlog() from public, fairqueue_app;
grant execute on function fairqueue.dashboard_backlog() to fairqueue_app;

-- The last day's service in one pass over the standings (a group's place in one type's order)
-- that were served in the day or wait now. Three kinds of row: one 'total' (how many tenants,
-- standings, jobs served, standings waiting and paused, and the sums of squares Jain's index is
-- made of: the service per tenant squared, per standing squared), one 'plan' per plan (its
-- tenants, standings, served, waiting, paused), then a 'tenant' row for each of the p_limit most
-- served tenants (the jobs with no tenant are the one whose tenant_id is null). Counts only.
create or replace function fairqueue.dashboard_service_unchecked(p_limit integer)
returns table (kind text, tenant_id text, plan text, tenants bigint, standings numeric,
               served numeric, waiting numeric, paused numeric, tenant_squares numeric,
               standing_squares numeric)
language sql stable set search_path = pg_catalog, pg_temp
as $$
-- One row per tenant with work, read by the three parts below.
with per_tenant as materialized (
    select s.tenant_key, min(s.tenant_id) as tenant_id, min(s.plan) as plan,
           count(*) as standings, sum(s.n) as served, sum(s.n::numeric * s.n) as squares,
           count(*) filter (where s.head_id is not null and not s.paused) as waiting,
           count(*) filter (where s.paused) as paused
      from fairqueue.served s
     where s.n > 0 or s.head_id is not null
     group by s.tenant_key
),
-- The day's totals.
total as (
    select 'total'::text, null::text, null::text, count(*), sum(t.standings), sum(t.served),
           sum(t.waiting), sum(t.paused), sum(t.served * t.served), sum(t.squares)
      from per_tenant t
),
-- Each plan's share.
by_plan as (
    select 'plan'::text, null::text, t.plan, count(*), sum(t.standings), sum(t.served),
           sum(t.waiting), sum(t.paused), null::numeric, null::numeric
      from per_tenant t
     group by t.plan
),
-- The most served tenants.
top as (
    select 'tenant'::text, t.tenant_id, t.plan, 1::bigint, t.standings::numeric,
           t.served, t.waiting::numeric, t.paused::numeric, null::numeric, null::numeric
      from per_tenant t
     order by t.served desc, t.tenant_id nulls first
     limit p_limit
)
select * from total
union all
(select * from by_plan order by 3)
union all
select * from top
$$;

alter function fairqueue.dashboard_service_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_service_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_service(p_limit integer)
returns table (kind text, tenant_id text, plan text, tenants bigint, standings numeric,
               served numeric, waiting numeric, paused numeric, tenant_squares numeric,
               standing_squares numeric)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_service: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_service_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_service(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_service(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_service(integer) to fairqueue_app;

-- The standings served most in the last day: type, group key and count, the most first.
create or replace function fairqueue.dashboard_most_served_unchecked(p_limit integer)
returns table (type text, group_key text, served bigint)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select s.type, s.group_key, s.n
  from fairqueue.served s
 where s.n > 0
 order by s.n desc, s.type, s.group_key
 limit p_limit
$$;

alter function fairqueue.dashboard_most_served_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_most_served_unchecked(integer)
    from public, fairqueue_app;

create or replace function fairqueue.dashboard_most_served(p_limit integer)
returns table (type text, group_key text, served bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 1000,
    format('dashboard_most_served: limit must be from 1 to 1000, got %s', p_limit));
select * from fairqueue.dashboard_most_served_unchecked(p_limit);
$$;

alter function fairqueue.dashboard_most_served(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_most_served(integer) from public, fairqueue_app;
grant execute on function fairqueue.dashboard_most_served(integer) to fairqueue_app;

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

-- Groups across tenants to pause or resume: the paused ones first, then those with the most
-- served standing (its type's count in the day), so that the busiest groups come first
-- without adding up every group's types. Key, tenant, that count, whether any of its
-- standings waits, whether paused.
create or replace function fairqueue.dashboard_groups_unchecked(p_limit integer)
returns table (group_key text, tenant_id text, served bigint, waiting boolean, paused boolean)
language sql stable set search_path = pg_catalog, pg_temp
as $$
-- The first standings in that order: enough for p_limit groups of up to eight types each.
with top as (
    select s.group_key, s.tenant_id, s.n, s.head_id is not null as waiting, s.paused
      from fairqueue.served s
     order by s.paused desc, s.n desc, s.group_key
     limit p_limit * 8
)
select t.group_key, min(t.tenant_id), max(t.n), bool_or(t.waiting), bool_or(t.paused)
  from top t
 group by t.group_key
 order by bool_or(t.paused) desc, max(t.n) desc, t.group_key
 limit p_limit
$$;

alter function fairqueue.dashboard_groups_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.dashboard_groups_unchecked(integer) from public, fairqueue_app;

create or replace function fairqueue.dashboard_groups(p_limit integer)
returns table (group_key text, tenant_id text, served bigint, waiting boolean, paused boolean)
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
