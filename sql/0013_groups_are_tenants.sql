-- A group is its tenant's: a tenant and a group id together name it everywhere.
--
-- Groups were keyed by the group id alone: tenant A pausing its group "inbox" paused tenant B's
-- "inbox" too, the two shared one served count, and every job without a group, whatever its
-- tenant, fell into one group shared by all, so tenants that never name groups got no fairness
-- between them. Now every job carries group_key, made from its tenant and its group id by one
-- function (fairqueue.group_key); a job with no group is in its tenant's default group, and
-- jobs with no tenant are one group of their own. groups rows carry the same key. The served
-- counts, the claim's walk over groups, pause and resume all go by it. The served counts are
-- recounted from the rows under the new keys; the claim's order is otherwise unchanged.

-- The one spelling of a group's key: the tenant (with \ and / escaped), a slash, the group id.
-- ('acme', 'inbox') is acme/inbox, ('acme', none) is acme/, (none, none) is /.
create function fairqueue.group_key(p_tenant_id text, p_group_id text) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp
as $$
select replace(replace(coalesce(p_tenant_id, ''), '\', '\\'), '/', '\/') || '/'
       || coalesce(p_group_id, '')
$$;
alter function fairqueue.group_key(text, text) owner to fairqueue_owner;
revoke execute on function fairqueue.group_key(text, text) from public;
grant execute on function fairqueue.group_key(text, text) to fairqueue_app;

alter table fairqueue.jobs
    add column group_key text not null
        generated always as (fairqueue.group_key(tenant_id, group_id)) stored;
drop index fairqueue.jobs_group_queue_idx;
create index jobs_group_queue_idx on fairqueue.jobs (type, group_key, created_at, id)
    where status = 'pending';

alter table fairqueue.groups
    add column key text not null generated always as (fairqueue.group_key(tenant_id, id)) stored;
alter table fairqueue.groups drop constraint groups_pkey;
alter table fairqueue.groups add constraint groups_pkey primary key (key);

-- Recounted under the new keys; the jobs table is locked by the column added above, so no claim
-- or completion runs in between.
truncate fairqueue.served;
insert into fairqueue.served (type, group_key, n)
select type, group_key, count(*)
  from fairqueue.jobs
 where served_at > (select watermark from fairqueue.served_watermark)
 group by 1, 2;

create or replace function fairqueue.jobs_served_insert() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from new_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, count(*)
      from new_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create or replace function fairqueue.jobs_served_update() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform fairqueue.served_near_edge(
        least((select min(served_at) from old_rows), (select min(served_at) from new_rows)));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, sum(d)
      from (select type, group_key, -1 as d, served_at from old_rows
            union all
            select type, group_key, 1, served_at from new_rows) as changed
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
    having sum(d) <> 0
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create or replace function fairqueue.jobs_served_delete() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from old_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, -count(*)
      from old_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;

create or replace function fairqueue.expire_served() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp as $$
declare
    wm timestamptz;
    target timestamptz := now() - interval '1 day';
begin
    if not pg_try_advisory_xact_lock(hashtextextended('fairqueue.served', 0)) then
        return false;
    end if;
    select watermark into wm from fairqueue.served_watermark for update;
    if wm >= target then
        return true;
    end if;
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, -count(*)
      from fairqueue.jobs
     where served_at > wm and served_at <= target
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    update fairqueue.served_watermark set watermark = target;
    return true;
end $$;

create or replace function fairqueue.has_claimable(p_type text) returns boolean
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select exists (
    select 1
      from fairqueue.jobs j
      left join fairqueue.groups g on g.key = j.group_key
     where j.type = p_type
       and j.status in ('pending', 'running')
       and j.run_after <= now()
       and (j.status = 'pending' or (j.lease_until < now() and j.attempts < j.max_attempts))
       and (g.status is null or g.status = 'active')
)
$$;

create or replace function fairqueue.claim_unchecked(
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
language sql volatile set search_path = pg_catalog, pg_temp
as $$
with recursive group_firsts (group_key, id, tenant_id, created_at, run_after) as (
    -- A skip scan: each step jumps to the first pending job of the next group in the index.
    (select j.group_key, j.id, j.tenant_id, j.created_at, j.run_after
       from fairqueue.jobs j
      where j.type = p_type and j.status = 'pending'
      order by j.type, j.group_key, j.created_at, j.id
      limit 1)
    union all
    select next.*
      from group_firsts w
      cross join lateral (
          select j.group_key, j.id, j.tenant_id, j.created_at, j.run_after
            from fairqueue.jobs j
           where j.type = p_type and j.status = 'pending'
             and j.group_key > w.group_key
           order by j.type, j.group_key, j.created_at, j.id
           limit 1) next
),
-- Where each active group with due work stands: its oldest due job (most often the first one
-- the skip scan landed on; otherwise one more probe), that job's plan, and how much the group
-- was served in the last day.
group_heads as (
    select f.group_key,
           coalesce(p_plan_priorities[array_position(p_plan_names, t.plan)],
                    p_default_priority) as priority,
           coalesce(s.n, 0) as served,
           head.id,
           head.tenant_id,
           head.created_at
      from group_firsts f
      cross join lateral (
          select f.id, f.tenant_id, f.created_at
           where f.run_after <= now()
          union all
          (select j.id, j.tenant_id, j.created_at
             from fairqueue.jobs j
            where f.run_after > now()
              and j.type = p_type and j.status = 'pending'
              and j.group_key = f.group_key and j.run_after <= now()
            order by j.type, j.group_key, j.created_at, j.id
            limit 1)) head
      left join fairqueue.groups g on g.key = f.group_key
      left join fairqueue.tenants t on t.id = head.tenant_id
      left join fairqueue.served s on s.type = p_type and s.group_key = f.group_key
     where g.status is null or g.status = 'active'
),
best_groups as (
    select h.group_key, h.served, h.id, h.tenant_id, h.created_at
      from group_heads h
     order by h.priority desc, h.served, h.created_at
     limit p_pool
),
-- How many jobs each best group offers: the pool shared out over the groups. One group offers
-- the whole pool (claimers that overlap need spares); many groups one each.
share as (
    select greatest(1, p_pool / greatest(count(*), 1)) as per_group from best_groups
),
-- Each best group offers its oldest due jobs. A group offering one offers its head, which the
-- walk above already found: no second probe. Only groups offering more read their index again.
offered as (
    select c.id, c.tenant_id, c.created_at, b.group_key,
           b.served + row_number() over (partition by b.group_key
                                         order by c.created_at, c.id) as served
      from best_groups b
      cross join share
      cross join lateral (
          select b.id, b.tenant_id, b.created_at
           where share.per_group = 1
          union all
          (select j.id, j.tenant_id, j.created_at
             from fairqueue.jobs j
            where share.per_group > 1
              and j.type = p_type and j.status = 'pending'
              and j.group_key = b.group_key and j.run_after <= now()
            order by j.type, j.group_key, j.created_at, j.id
            limit share.per_group)) c
    union all
    -- Jobs whose claimer died before their last attempt: found by the lease index, few.
    select j.id, j.tenant_id, j.created_at, j.group_key,
           coalesce(s.n, 0)
             + row_number() over (partition by j.group_key
                                  order by j.created_at, j.id)
      from fairqueue.jobs j
      left join fairqueue.groups g on g.key = j.group_key
      left join fairqueue.served s on s.type = p_type and s.group_key = j.group_key
     where j.type = p_type and j.status = 'running' and j.lease_until < now()
       and j.run_after <= now() and j.attempts < j.max_attempts
       and (g.status is null or g.status = 'active')
),
ranked as (
    select o.id,
           coalesce(p_plan_priorities[array_position(p_plan_names, t.plan)],
                    p_default_priority) as priority,
           o.served, o.created_at
      from offered o
      left join fairqueue.tenants t on t.id = o.tenant_id
     order by priority desc, o.served, o.created_at, o.id
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
