-- name: expire_served
-- Moves the served window's edge up to now() - 1 day; skipped while it is less than a second stale.
select fairqueue.expire_served()
 where (select watermark from fairqueue.served_watermark) < now() - interval '1 day 1 second';

-- name: claim_batch
-- Fair order: plan priority, then served-in-the-last-day (each job already picked from the same
-- group in this batch counts as served, so one batch interleaves groups), then age.
with claimable as (
    -- One status per branch: the planner then estimates each from that status alone, instead of
    -- multiplying `status in (...)` by `status = 'pending' or ...` as if they were independent
    -- (which shrinks the estimate by the pending share of the table once more, and with it the
    -- join methods, as done history grows).
    select j.id, j.type, j.tenant_id, j.group_id, j.created_at
      from fairqueue.jobs j
     where j.type = %(type)s and j.status = 'pending' and j.run_after <= now()
    union all
    select j.id, j.type, j.tenant_id, j.group_id, j.created_at
      from fairqueue.jobs j
     where j.type = %(type)s and j.status = 'running' and j.run_after <= now()
       and j.lease_until < now() and j.attempts < j.max_attempts
),
ranked as (
    select c.id,
           coalesce(plan.priority, %(default_priority)s) as priority,
           coalesce(s.n, 0)
             + row_number() over (partition by coalesce(c.group_id, '')
                                  order by c.created_at, c.id) as served,
           c.created_at
      from claimable c
      left join fairqueue.tenants t on t.id = c.tenant_id
      left join unnest(%(plan_names)s::text[], %(plan_priorities)s::int[]) as plan (name, priority)
             on plan.name = t.plan
      left join fairqueue.groups g on g.id = c.group_id
      left join fairqueue.served s on s.type = c.type and s.group_key = coalesce(c.group_id, '')
     where g.status is null or g.status = 'active'
     order by priority desc, served, c.created_at, c.id
     limit %(pool)s
),
picked as (
    select j.id
      from fairqueue.jobs j
      join ranked r on r.id = j.id
     where j.status in ('pending', 'running')
       and j.run_after <= now()
       and (j.status = 'pending' or (j.lease_until < now() and j.attempts < j.max_attempts))
     order by r.priority desc, r.served, r.created_at, r.id
     limit %(batch)s
       for update of j skip locked
)
update fairqueue.jobs j
   set status = 'running',
       attempts = j.attempts + 1,
       locked_at = now(),
       lease_until = now() + %(lease_s)s * interval '1 second',
       locked_by = %(locked_by)s,
       run_id = %(run_id)s
  from picked
 where j.id = picked.id
returning j.id, j.type, j.payload, j.tenant_id, j.group_id, j.attempts, j.max_attempts;

-- name: has_claimable
select exists (
    select 1
      from fairqueue.jobs j
      left join fairqueue.groups g on g.id = j.group_id
     where j.type = %(type)s
       and j.status in ('pending', 'running')
       and j.run_after <= now()
       and (j.status = 'pending' or (j.lease_until < now() and j.attempts < j.max_attempts))
       and (g.status is null or g.status = 'active')
);

-- name: complete
update fairqueue.jobs
   set status = 'done', finished_at = now(), lease_until = null, last_error = null
 where id = %(id)s and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: complete_many
update fairqueue.jobs
   set status = 'done', finished_at = now(), lease_until = null, last_error = null
 where id = any(%(ids)s::uuid[]) and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: retry_or_fail
-- Backoff counts the attempt the claim already added: 2, then 4, then 8 units (a unit is a
-- minute unless the stage sets another).
update fairqueue.jobs
   set status = case when attempts >= max_attempts then 'failed' else 'pending' end,
       run_after = case when attempts >= max_attempts then run_after
                        else now() + power(2, attempts) * %(unit_s)s * interval '1 second' end,
       finished_at = case when attempts >= max_attempts then now() end,
       lease_until = null,
       last_error = %(error)s
 where id = %(id)s and status = 'running' and locked_by = %(locked_by)s
returning id, status, run_after;

-- name: fail_now
update fairqueue.jobs
   set status = 'failed', finished_at = now(), lease_until = null, last_error = %(error)s
 where id = %(id)s and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: defer
-- Not an attempt: the claim's increment is undone.
update fairqueue.jobs
   set status = 'pending',
       run_after = greatest(%(until)s::timestamptz, now()),
       attempts = greatest(attempts - 1, 0),
       lease_until = null
 where id = %(id)s and status = 'running' and locked_by = %(locked_by)s
returning id, run_after;

-- name: release
-- Claimed but never started (the run was stopped): back as it was, attempt undone.
update fairqueue.jobs
   set status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = null
 where id = any(%(ids)s::uuid[]) and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: fail_abandoned
-- Jobs whose invocation died on their last attempt: nothing will claim them again.
update fairqueue.jobs
   set status = 'failed',
       finished_at = now(),
       lease_until = null,
       last_error = coalesce(last_error || E'\n', '')
                    || 'lease expired on the last attempt (' || attempts || ' of ' || max_attempts || ')'
 where id in (select id
                from fairqueue.jobs
               where status = 'running' and lease_until < now() and attempts >= max_attempts
                 and type = any(%(types)s::text[])
               order by lease_until
               limit %(limit)s
                 for update skip locked)
returning id, type, payload, tenant_id, group_id, attempts, max_attempts, last_error;
