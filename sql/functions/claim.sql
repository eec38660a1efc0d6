-- The fair claim, the one definition of the order: plan priority, then the group served least
-- of this type in the last day (each job picked from a group in this batch counts as served, so
-- a batch interleaves groups), then the oldest job. A batch of N is exactly the first N picks of
-- that order made one at a time, less the jobs another claimer holds. It walks the groups with
-- pending work of the type (one index probe per group), ranks their heads, lets the best `p_pool`
-- groups offer their oldest due jobs (as many as each could take of the batch, at least a share
-- of the pool), adds jobs whose lease expired before their last attempt, and locks the best
-- `p_batch` of those it can (skip locked). Paused groups offer nothing.
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
language sql set search_path = pg_catalog, pg_temp
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
    select h.group_key, h.priority, h.served, h.id, h.tenant_id, h.created_at,
           row_number() over (order by h.priority desc, h.served, h.created_at, h.id) as rank
      from group_heads h
     order by h.priority desc, h.served, h.created_at, h.id
     limit p_pool
),
-- The batch's picks come from the first p_batch of these groups alone: each of those holds a due
-- head that picks before any job of a group ranked below them. How many picks each of them can
-- take: its job d+1 stands at served + d, behind every group of a higher priority and every
-- group of its own whose served count is lower, and behind its own first d jobs. The levels are
-- the (priority, served) places of those heads, with how many heads stand at or before each.
levels as (
    select l.priority, l.served,
           (sum(l.heads) over (order by l.priority desc, l.served))::bigint as heads_up_to,
           lead(l.served) over (partition by l.priority order by l.served) as next_served
      from (select b.priority, b.served, count(*) as heads
              from best_groups b
             where b.rank <= p_batch
             group by 1, 2) l
),
reach as materialized (
    select b.group_key,
           1 + coalesce(max(least(coalesce(l.next_served - b.served, p_batch),
                                  p_batch - l.heads_up_to))
                          filter (where p_batch - l.heads_up_to >= l.served - b.served + 1),
                        0) as picks
      from best_groups b
      join levels l on l.priority = b.priority and l.served >= b.served
     where b.rank <= p_batch
     group by b.group_key
),
-- How many jobs each best group offers: as many as it can take of the batch, and at least its
-- share of the pool, so claimers that overlap find spares (one group alone offers the whole pool).
share as materialized (
    select greatest(1, p_pool / greatest(count(*), 1)) as per_group from best_groups
),
offers as (
    select b.group_key, b.served, b.id, b.tenant_id, b.created_at,
           greatest(share.per_group, coalesce(r.picks, 0)) as n
      from best_groups b
      cross join share
      left join reach r on r.group_key = b.group_key
),
-- Each best group offers its oldest due jobs. A group offering one offers its head, which the
-- walk above already found: no second probe. Only groups offering more read their index again.
offered as (
    select c.id, c.tenant_id, c.created_at, b.group_key,
           b.served + row_number() over (partition by b.group_key
                                         order by c.created_at, c.id) as served
      from offers b
      cross join lateral (
          select b.id, b.tenant_id, b.created_at
           where b.n = 1
          union all
          (select j.id, j.tenant_id, j.created_at
             from fairqueue.jobs j
            where b.n > 1
              and j.type = p_type and j.status = 'pending'
              and j.group_key = b.group_key and j.run_after <= now()
            order by j.type, j.group_key, j.created_at, j.id
            limit b.n)) c
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

alter function fairqueue.claim_unchecked(text, integer, integer, double precision, text, uuid,
    text[], integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim_unchecked(text, integer, integer, double precision, text,
    uuid, text[], integer[], integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs claim_unchecked as the owner.
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
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_batch between 1 and 1000,
    format('claim: batch must be from 1 to 1000, got %s', p_batch));
select fairqueue.door_argument(p_pool between p_batch and 10000,
    format('claim: pool must be from the batch (%s) to 10000, got %s', p_batch, p_pool));
select fairqueue.door_argument(p_lease_s > 0 and p_lease_s <= 86400,
    format('claim: lease_s must be over 0 and at most 86400 (a day), got %s', p_lease_s));
select fairqueue.door_argument(p_locked_by <> '' and length(p_locked_by) <= 200,
    'claim: locked_by must be 1 to 200 characters');
select * from fairqueue.claim_unchecked(p_type, p_batch, p_pool, p_lease_s, p_locked_by,
    p_run_id, p_plan_names, p_plan_priorities, p_default_priority);
$$;

alter function fairqueue.claim(text, integer, integer, double precision, text, uuid, text[],
    integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.claim(text, integer, integer, double precision, text, uuid,
    text[], integer[], integer) from public, fairqueue_app;
grant execute on function fairqueue.claim(text, integer, integer, double precision, text, uuid,
    text[], integer[], integer) to fairqueue_app;

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

-- Whether a job of the type could be claimed now that no other transaction holds: what a claim
-- that came back short asks before it looks further down the order. Skips the rows other
-- claimers have locked, and locks the one it finds until the caller's transaction ends.
create or replace function fairqueue.claimable_unheld(p_type text) returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1
       from fairqueue.jobs j
       left join fairqueue.groups g on g.key = j.group_key
      where j.type = p_type and j.status = 'pending' and j.run_after <= now()
        and (g.status is null or g.status = 'active')
      limit 1
        for update of j skip locked;
    if found then
        return true;
    end if;
    perform 1
       from fairqueue.jobs j
       left join fairqueue.groups g on g.key = j.group_key
      where j.type = p_type and j.status = 'running' and j.run_after <= now()
        and j.lease_until < now() and j.attempts < j.max_attempts
        and (g.status is null or g.status = 'active')
      limit 1
        for update of j skip locked;
    return found;
end $$;
alter function fairqueue.claimable_unheld(text) owner to fairqueue_owner;
revoke all on function fairqueue.claimable_unheld(text) from public, fairqueue_app;
grant execute on function fairqueue.claimable_unheld(text) to fairqueue_app;
