-- name: enqueue
insert into fairqueue.jobs (type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after)
values (%(type)s, %(payload)s, %(tenant_id)s, %(group_id)s, %(dedupe_key)s, %(max_attempts)s,
        coalesce(%(run_after)s::timestamptz, now() + %(delay_s)s * interval '1 second'))
on conflict (coalesce(tenant_id, ''), dedupe_key)
   where dedupe_key is not null and status in ('queued', 'pending', 'running')
   do nothing
returning id;

-- name: get_job
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at, finished_at
  from fairqueue.jobs
 where id = %(id)s;

-- name: status_by_type
select type,
       count(*) filter (where status = 'pending' and run_after <= now()) as backlog,
       count(*) filter (where status = 'pending' and run_after > now()) as scheduled,
       count(*) filter (where status = 'running' and lease_until >= now()) as running,
       count(*) filter (where status = 'running' and lease_until < now()) as stuck,
       count(*) filter (where status = 'failed') as failed,
       count(*) filter (where status = 'done') as done
  from fairqueue.jobs
 group by type
 order by type;

-- name: count_open
select count(*) from fairqueue.jobs where status in ('queued', 'pending', 'running');
