-- The claim reads a plan's priority from the plan arrays it is given, instead of joining them.
--
-- The claim joined each group's tenant to a small table built from the plan names and priorities
-- it is passed. The planner made that a hash join inside the loop over groups, so the table was
-- hashed again for every group with pending work (a thousand times per claim in the benchmark).
-- The priority is now the array element at the plan's position: the same value, no join. Order
-- and results are unchanged.

create or replace function fairqueue.claim(
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
with recursive group_firsts (group_key, id, tenant_id, created_at, run_after) as (
    -- A skip scan: each step jumps to the first pending job of the next group in the index.
    (select coalesce(j.group_id, ''), j.id, j.tenant_id, j.created_at, j.run_after
       from fairqueue.jobs j
      where j.type = p_type and j.status = 'pending'
      order by j.type, coalesce(j.group_id, ''), j.created_at, j.id
      limit 1)
    union all
    select next.*
      from group_firsts w
      cross join lateral (
          select coalesce(j.group_id, ''), j.id, j.tenant_id, j.created_at, j.run_after
            from fairqueue.jobs j
           where j.type = p_type and j.status = 'pending'
             and coalesce(j.group_id, '') > w.group_key
           order by j.type, coalesce(j.group_id, ''), j.created_at, j.id
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
              and coalesce(j.group_id, '') = f.group_key and j.run_after <= now()
            order by j.type, coalesce(j.group_id, ''), j.created_at, j.id
            limit 1)) head
      left join fairqueue.groups g on g.id = nullif(f.group_key, '')
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
              and coalesce(j.group_id, '') = b.group_key and j.run_after <= now()
            order by j.type, coalesce(j.group_id, ''), j.created_at, j.id
            limit share.per_group)) c
    union all
    -- Jobs whose claimer died before their last attempt: found by the lease index, few.
    select j.id, j.tenant_id, j.created_at, coalesce(j.group_id, ''),
           coalesce(s.n, 0)
             + row_number() over (partition by coalesce(j.group_id, '')
                                  order by j.created_at, j.id)
      from fairqueue.jobs j
      left join fairqueue.groups g on g.id = j.group_id
      left join fairqueue.served s on s.type = p_type and s.group_key = coalesce(j.group_id, '')
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
