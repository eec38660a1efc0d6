-- name: enqueue
insert into fairqueue.jobs (type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after)
values (%(type)s, %(payload)s, %(tenant_id)s, %(group_id)s, %(dedupe_key)s, %(max_attempts)s,
        coalesce(%(run_after)s::timestamptz, now() + %(delay_s)s * interval '1 second'))
on conflict (coalesce(tenant_id, ''), dedupe_key)
   where dedupe_key is not null and status in ('queued', 'pending', 'running')
   do nothing
returning id;

-- name: get_job
-- Under the tenant's clamp, and naming the tenant too (a superuser login bypasses the clamp).
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at, finished_at
  from fairqueue.jobs
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s;

-- name: status_by_type
-- A door (sql/functions/queue_status.sql): counts per type across tenants.
select type, queued, backlog, scheduled, running, stuck, failed, done
  from fairqueue.queue_status();

-- name: open_jobs
-- A door: open jobs across tenants; with due_within, pending ones only if due by then.
select fairqueue.open_jobs(%(due_within)s) as open;
