-- Tenant isolation enforced by Postgres.
--
-- fairqueue_owner owns every object; fairqueue_app is what the library runs as: it owns
-- nothing, has no BYPASSRLS, and sees a tenant's rows only inside a transaction that set
-- fairqueue.tenant_id (set_config(..., true), so the setting dies with the transaction). A
-- login role for the application is granted fairqueue_app; see docs/tenancy.md.

do $$
begin
    begin
        create role fairqueue_owner nologin;
    exception when duplicate_object then null;
    end;
    begin
        create role fairqueue_app nologin;
    exception when duplicate_object then null;
    end;
end $$;

-- The migrating role must be able to hand objects to the owner.
grant fairqueue_owner to current_user;

alter schema fairqueue owner to fairqueue_owner;
alter table fairqueue.migrations owner to fairqueue_owner;
alter table fairqueue.tenants owner to fairqueue_owner;
alter table fairqueue.groups owner to fairqueue_owner;
alter table fairqueue.jobs owner to fairqueue_owner;
alter table fairqueue.runs owner to fairqueue_owner;
alter table fairqueue.quotas owner to fairqueue_owner;
alter table fairqueue.served owner to fairqueue_owner;
alter table fairqueue.served_watermark owner to fairqueue_owner;
alter function fairqueue.served_edge_lock() owner to fairqueue_owner;
alter function fairqueue.served_near_edge(timestamptz) owner to fairqueue_owner;
alter function fairqueue.jobs_served_insert() owner to fairqueue_owner;
alter function fairqueue.jobs_served_update() owner to fairqueue_owner;
alter function fairqueue.jobs_served_delete() owner to fairqueue_owner;
alter function fairqueue.expire_served() owner to fairqueue_owner;

-- The clamp: the tenant this transaction works for. An unset or empty setting matches nothing,
-- for text and uuid columns alike (nullif before the cast, so '' never reaches ::uuid).
create function fairqueue.current_tenant() returns text
language sql stable as $$ select nullif(current_setting('fairqueue.tenant_id', true), '') $$;

-- System jobs (no tenant) are visible only to a transaction that asked for them.
create function fairqueue.system_clamp() returns boolean
language sql stable as $$ select coalesce(current_setting('fairqueue.system', true), '') = 'on' $$;

-- Whether a row with this tenant is inside the transaction's clamp: the one predicate of every
-- fairqueue table's policy (inlined by the planner: a plain SQL expression).
create function fairqueue.within_clamp(p_tenant_id text) returns boolean
language sql stable as $$
    select p_tenant_id = fairqueue.current_tenant()
        or (p_tenant_id is null and fairqueue.system_clamp())
$$;

alter function fairqueue.current_tenant() owner to fairqueue_owner;
alter function fairqueue.system_clamp() owner to fairqueue_owner;
alter function fairqueue.within_clamp(text) owner to fairqueue_owner;

alter table fairqueue.jobs enable row level security;
alter table fairqueue.jobs force row level security;
create policy jobs_owner on fairqueue.jobs to fairqueue_owner using (true) with check (true);
create policy jobs_tenant on fairqueue.jobs to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));

alter table fairqueue.groups enable row level security;
alter table fairqueue.groups force row level security;
create policy groups_owner on fairqueue.groups to fairqueue_owner using (true) with check (true);
create policy groups_tenant on fairqueue.groups to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));

alter table fairqueue.tenants enable row level security;
alter table fairqueue.tenants force row level security;
create policy tenants_owner on fairqueue.tenants to fairqueue_owner using (true) with check (true);
create policy tenants_self on fairqueue.tenants to fairqueue_app
    using (id = fairqueue.current_tenant()) with check (id = fairqueue.current_tenant());

grant usage on schema fairqueue to fairqueue_app;
grant select, insert, update, delete on fairqueue.jobs, fairqueue.groups, fairqueue.tenants
    to fairqueue_app;
grant select, insert, update on fairqueue.runs to fairqueue_app;
grant select, insert, update on fairqueue.quotas to fairqueue_app;
-- The served triggers run as whoever changed jobs.
grant select, insert, update on fairqueue.served to fairqueue_app;
grant select on fairqueue.served_watermark to fairqueue_app;
grant execute on function fairqueue.current_tenant(), fairqueue.system_clamp(),
    fairqueue.served_edge_lock(), fairqueue.served_near_edge(timestamptz) to fairqueue_app;

-- The narrow doors: the only cross-tenant steps. Each runs as the owner (security definer) and
-- hands back ids, tenant ids and counts, never a payload; whatever a worker then does to a job
-- it does under that job's tenant clamp. docs/tenancy.md lists them and why each is needed.

alter function fairqueue.expire_served() security definer set search_path = pg_catalog, pg_temp;

-- The fair claim: plan priority, then served in the last day (each job picked from a group in
-- this batch counts as served, so a batch interleaves groups), then age. Claimable rows come
-- from one branch per status so the planner estimates each from that status alone.
create function fairqueue.claim(
    p_type text,
    p_batch integer,
    p_pool integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer
) returns table (id uuid, tenant_id text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
with claimable as (
    select j.id, j.type, j.tenant_id, j.group_id, j.created_at
      from fairqueue.jobs j
     where j.type = p_type and j.status = 'pending' and j.run_after <= now()
    union all
    select j.id, j.type, j.tenant_id, j.group_id, j.created_at
      from fairqueue.jobs j
     where j.type = p_type and j.status = 'running' and j.run_after <= now()
       and j.lease_until < now() and j.attempts < j.max_attempts
),
ranked as (
    select c.id,
           coalesce(plan.priority, p_default_priority) as priority,
           coalesce(s.n, 0)
             + row_number() over (partition by coalesce(c.group_id, '')
                                  order by c.created_at, c.id) as served,
           c.created_at
      from claimable c
      left join fairqueue.tenants t on t.id = c.tenant_id
      left join unnest(p_plan_names, p_plan_priorities) as plan (name, priority)
             on plan.name = t.plan
      left join fairqueue.groups g on g.id = c.group_id
      left join fairqueue.served s on s.type = c.type and s.group_key = coalesce(c.group_id, '')
     where g.status is null or g.status = 'active'
     order by priority desc, served, c.created_at, c.id
     limit p_pool
),
picked as (
    select j.id
      from fairqueue.jobs j
      join ranked r on r.id = j.id
     where j.status in ('pending', 'running')
       and j.run_after <= now()
       and (j.status = 'pending' or (j.lease_until < now() and j.attempts < j.max_attempts))
     order by r.priority desc, r.served, r.created_at, r.id
     limit p_batch
       for update of j skip locked
)
update fairqueue.jobs j
   set status = 'running',
       attempts = j.attempts + 1,
       locked_at = now(),
       lease_until = now() + p_lease_s * interval '1 second',
       locked_by = p_locked_by,
       run_id = p_run_id
  from picked
 where j.id = picked.id
returning j.id, j.tenant_id
$$;

create function fairqueue.has_claimable(p_type text) returns boolean
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select exists (
    select 1
      from fairqueue.jobs j
      left join fairqueue.groups g on g.id = j.group_id
     where j.type = p_type
       and j.status in ('pending', 'running')
       and j.run_after <= now()
       and (j.status = 'pending' or (j.lease_until < now() and j.attempts < j.max_attempts))
       and (g.status is null or g.status = 'active')
)
$$;

-- Jobs of these types whose invocation died on their last attempt: failed here, returned so
-- the caller can run their give-up hooks under each job's tenant clamp.
create function fairqueue.fail_abandoned(p_types text[], p_limit integer)
returns table (id uuid, type text, tenant_id text, last_error text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
update fairqueue.jobs
   set status = 'failed',
       finished_at = now(),
       lease_until = null,
       last_error = coalesce(last_error || E'\n', '')
                    || 'lease expired on the last attempt (' || attempts || ' of ' || max_attempts || ')'
 where id in (select j.id
                from fairqueue.jobs j
               where j.status = 'running' and j.lease_until < now()
                 and j.attempts >= j.max_attempts and j.type = any(p_types)
               order by j.lease_until
               limit p_limit
                 for update skip locked)
returning id, type, tenant_id, last_error
$$;

create function fairqueue.queue_status()
returns table (type text, backlog bigint, scheduled bigint, running bigint, stuck bigint,
               failed bigint, done bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select type,
       count(*) filter (where status = 'pending' and run_after <= now()),
       count(*) filter (where status = 'pending' and run_after > now()),
       count(*) filter (where status = 'running' and lease_until >= now()),
       count(*) filter (where status = 'running' and lease_until < now()),
       count(*) filter (where status = 'failed'),
       count(*) filter (where status = 'done')
  from fairqueue.jobs
 group by type
 order by type
$$;

create function fairqueue.open_jobs(p_due_within interval) returns bigint
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select count(*)
  from fairqueue.jobs
 where status in ('queued', 'running')
    or (status = 'pending' and (p_due_within is null or run_after <= now() + p_due_within))
$$;

alter function fairqueue.claim(text, integer, integer, double precision, text, uuid, text[],
    integer[], integer) owner to fairqueue_owner;
alter function fairqueue.has_claimable(text) owner to fairqueue_owner;
alter function fairqueue.fail_abandoned(text[], integer) owner to fairqueue_owner;
alter function fairqueue.queue_status() owner to fairqueue_owner;
alter function fairqueue.open_jobs(interval) owner to fairqueue_owner;

revoke execute on all functions in schema fairqueue from public;
grant execute on function
    fairqueue.current_tenant(),
    fairqueue.system_clamp(),
    fairqueue.within_clamp(text),
    fairqueue.served_edge_lock(),
    fairqueue.served_near_edge(timestamptz),
    fairqueue.expire_served(),
    fairqueue.claim(text, integer, integer, double precision, text, uuid, text[], integer[], integer),
    fairqueue.has_claimable(text),
    fairqueue.fail_abandoned(text[], integer),
    fairqueue.queue_status(),
    fairqueue.open_jobs(interval)
    to fairqueue_app;

-- Puts an application table under the same tenant clamp: ENABLE and FORCE row level security
-- and one policy for fairqueue_app on its tenant column, text or uuid. Run it as the table's
-- owner; grant fairqueue_app what it may do to the table yourself.
create function fairqueue.protect_table(p_table regclass, p_tenant_column name)
returns void
language plpgsql
as $$
declare
    column_type regtype;
    clamp text;
begin
    select a.atttypid::regtype into column_type
      from pg_attribute a
     where a.attrelid = p_table and a.attname = p_tenant_column and not a.attisdropped;
    if column_type is null then
        raise exception 'fairqueue.protect_table: % has no column %', p_table, p_tenant_column;
    end if;
    if column_type = 'uuid'::regtype then
        clamp := format('%I = fairqueue.current_tenant()::uuid', p_tenant_column);
    elsif column_type in ('text'::regtype, 'character varying'::regtype) then
        clamp := format('%I = fairqueue.current_tenant()', p_tenant_column);
    else
        raise exception 'fairqueue.protect_table: %.% is %, not text or uuid',
            p_table, p_tenant_column, column_type;
    end if;
    execute format('alter table %s enable row level security', p_table);
    execute format('alter table %s force row level security', p_table);
    execute format('drop policy if exists fairqueue_tenant on %s', p_table);
    execute format('create policy fairqueue_tenant on %s to fairqueue_app using (%s) with check (%s)',
                   p_table, clamp, clamp);
end $$;

alter function fairqueue.protect_table(regclass, name) owner to fairqueue_owner;
grant execute on function fairqueue.protect_table(regclass, name) to public;
