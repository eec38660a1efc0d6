-- name: enqueue
-- One job, one round trip (sql/functions/enqueue.sql): the clamp unless the transaction has one,
-- then the insert under it. `clamped_to`, `system` and `matches` say what the clamp is; `id` is
-- NULL when the insert was refused for another tenant's clamp or when an open job of the tenant
-- holds the dedupe key.
select clamped_to, system, matches, id
  from fairqueue.enqueue_job(%(type)s, %(tenant_id)s, %(payload)s::jsonb, %(group_id)s,
                             %(dedupe_key)s, %(max_attempts)s, %(run_after)s::timestamptz,
                             %(delay_s)s, %(cost)s);

-- name: status_by_type
-- A door (sql/functions/queue_status.sql): counts per type across tenants.
select type, queued, backlog, scheduled, running, stuck, failed, done
  from fairqueue.queue_status();

-- name: open_jobs
-- A door: open jobs across tenants; with due_within, pending ones only if due by then.
select fairqueue.open_jobs(%(due_within)s) as open;

-- name: enqueue_many
-- The jobs of one enqueue_many call in one round trip (sql/functions/enqueue.sql): one row, its
-- ids in the order the items were given. The payloads go as one JSON array, parsed once; the
-- other arrays in binary (the b placeholders): psycopg sends each element as it is, where the
-- text form quotes every string (7 ms of a call of a thousand small payloads, measured).
select clamped_to, system, matches, ids
  from fairqueue.enqueue_jobs(%(type)s, %(tenant_id)s, %(payloads)s::jsonb,
                              %(group_ids)b::text[], %(dedupe_keys)b::text[],
                              %(max_attempts)b::integer[], %(run_afters)b::timestamptz[],
                              %(delays_s)b::float8[], %(costs)b::integer[]);

-- name: find_jobs
-- A door (sql/functions/job_info.sql): ids and tenants of the matching jobs, newest first.
select id, tenant_id
  from fairqueue.find_jobs(%(ids)s, %(status)s, %(type)s, %(tenant_id)s, %(group_id)s,
                           %(limit)s);

-- name: job_details
-- Under the tenant's clamp: everything an operator reads about one job, open or finished.
select id, type, status, tenant_id, group_id, group_key, lane, dedupe_key, attempts,
       max_attempts, run_after, created_at, locked_at, lease_until, locked_by, finished_at,
       last_error, run_id, credit_cost, delta_of, upstream_id, payload, output
  from fairqueue.all_jobs
 where id = any(%(ids)s) and tenant_id is not distinct from %(tenant_id)s;

-- name: lane_ahead
-- Under the tenant's clamp: the lane's first-pass jobs that come before this one, and the one
-- that holds the lane (pending or running), if any.
select count(*) as ahead,
       (array_agg(id order by created_at, id) filter (where status in ('pending', 'running')))[1]
           as holder
  from fairqueue.jobs
 where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s and delta_of is null
   and status in ('queued', 'pending', 'running') and (created_at, id) < (%(created_at)s, %(id)s);

-- name: group_ahead
-- Under the tenant's clamp: the group's due pending jobs older than this one (they go first).
select count(*) as ahead
  from fairqueue.jobs
 where type = %(type)s and group_key = %(group_key)s and status = 'pending'
   and run_after <= now() and (created_at, id) < (%(created_at)s, %(id)s)
   and tenant_id is not distinct from %(tenant_id)s;

-- name: group_paused
-- Under the tenant's clamp.
select status = 'paused' as paused
  from fairqueue.groups
 where key = %(group_key)s and tenant_id is not distinct from %(tenant_id)s;

-- name: tenant_running
-- Under the tenant's clamp: its plan (none when it has no row) and how many of its jobs of the
-- type run now, which its plan's cap (Plan.max_running) is held against.
select (select t.plan from fairqueue.tenants t where t.id = %(tenant_id)s) as plan,
       (select count(*) from fairqueue.jobs j
         where j.type = %(type)s and j.tenant_id = %(tenant_id)s and j.status = 'running'
           and j.lease_until is not null) as running;

-- name: group_standing
-- A door (sql/functions/job_info.sql): the group's place in its type's order, and the standings
-- of the groups just ahead, own row first.
select place, own, plan, served, oldest_created_at
  from fairqueue.group_standing(%(type)s, %(group_key)s, %(plan_names)s, %(plan_priorities)s,
                                %(default_priority)s, %(ahead)s);

-- name: tenant_standing
-- A door (sql/functions/job_info.sql): for a stage fair between tenants first, the tenant's place
-- in its type's order of tenants and the standings of the tenants just ahead, own row first, which
-- also says how many of the tenant's groups stand before the job's group.
select place, own, plan, served, oldest_created_at, groups_ahead
  from fairqueue.tenant_standing(%(type)s, %(group_key)s, %(plan_names)s, %(plan_priorities)s,
                                 %(default_priority)s, %(ahead)s);

-- name: job_status
-- Under the tenant's clamp: where a job stands, open or finished.
select status, lane, delta_of
  from fairqueue.all_jobs
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s;

-- name: cancel_job
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp, after the lane's lock: a job no
-- claim holds yet becomes cancelled. A claim that took it first has made it running, and the row
-- is left as it is.
select status, lane, delta_of from fairqueue.job_cancel(%(id)s, %(tenant_id)s, %(note)s);

-- name: job_for_retry
-- Under the tenant's clamp: what a retry checks first, open or finished.
select status, type, lane, delta_of, credit_cost, upstream_id, dedupe_key
  from fairqueue.all_jobs
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s;

-- name: retry_failed
-- A door (sql/functions/retry.sql), inside the caller's clamp: the failed job made ready again.
select id, lane, delta_of, status
  from fairqueue.retry_failed(%(id)s, %(tenant_id)s, %(note)s);

-- name: served_groups
-- A door (sql/functions/overview.sql): the most served groups, then the least served with due
-- work waiting, each of those with its tenant's plan and running jobs of the type.
select type, group_key, served, waiting, most, plan, running
  from fairqueue.served_groups(%(limit)s);
