-- A lane belongs to a tenant: every lane query names the tenant as well as the row-level
-- security clamp does, so a caller that bypasses RLS (a superuser) still sees one lane.

-- name: lane_lock
-- The two-key advisory lock form: its key space does not overlap the one-key form's.
select pg_advisory_xact_lock(%(namespace)s, hashtext(%(key)s));

-- name: admission
-- A stage with no upstream service: checks and insert in one statement; status is NULL when
-- nothing was admitted (sql/functions/admission.sql).
select clamped_to, system, matches, id, delta_found, balance, busy, dedupe_taken, status, place
  from fairqueue.admission(%(tenant_id)s, %(lane)s, %(lane_lock)s, %(lane_key)s,
                           %(credit_lock)s, %(credit_key)s, %(charge)s, %(delta_of)s,
                           %(dedupe_key)s, %(type)s, %(payload)s, %(group_id)s,
                           %(max_attempts)s, %(fair_cost)s);

-- name: admission_checks
-- Clamps, then takes the lane's lock, and the balance's when charge > 0.
select clamped_to, system, matches, id, delta_found, balance, busy, dedupe_taken
  from fairqueue.admission_checks(%(tenant_id)s, %(lane)s, %(lane_lock)s, %(lane_key)s,
                                  %(credit_lock)s, %(credit_key)s, %(charge)s, %(delta_of)s,
                                  %(dedupe_key)s);

-- name: admission_insert
-- Under the lane's lock: the job, its debit, its place; no row when the dedupe key was taken.
select status, place
  from fairqueue.admission_insert(%(id)s, %(type)s, %(payload)s, %(tenant_id)s, %(group_id)s,
                                  %(dedupe_key)s, %(max_attempts)s, %(lane)s, %(delta_of)s,
                                  %(cost)s, %(upstream_id)s, %(status)s, %(fair_cost)s);

-- name: lane_job
-- Under the tenant's clamp: one job of the lane, and its place in it: 1 holds the lane (a delta
-- is always 1), n waits behind n - 1 first-pass jobs (fairqueue.lane_place), a finished job has
-- none. What the API shows of a job.
select j.id, j.type, j.status, j.lane, j.delta_of, j.attempts, j.created_at, j.finished_at,
       j.last_error, j.output,
       case
           when j.status not in ('queued', 'pending', 'running') then null
           when j.delta_of is not null then 1
           else fairqueue.lane_place(j.tenant_id, j.lane, j.created_at, j.id)
       end as place
  from fairqueue.all_jobs j
 where j.id = %(id)s and j.tenant_id is not distinct from %(tenant_id)s and j.lane = %(lane)s;

-- name: promote_next
-- A door (sql/functions/lifecycle.sql), under the lane's lock and the tenant's clamp: the oldest
-- queued first-pass job becomes pending, unless a first-pass job already holds the lane.
select id, type from fairqueue.lane_promote_next(%(tenant_id)s, %(lane)s);

-- name: lane_jobs
-- Under the tenant's clamp: the lane's open jobs in order, the one holding it first, deltas
-- last, each with the place lane_job gives it.
select id, type, status, lane, delta_of, attempts, created_at, finished_at, last_error, output,
       case
           when delta_of is not null then 1
           else row_number() over (partition by delta_of is null order by created_at, id)
       end as place
  from fairqueue.jobs
 where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s
   and status in ('queued', 'pending', 'running')
 order by (delta_of is not null), created_at, id;

-- name: credit_balance
select fairqueue.credit_balance(%(tenant_id)s) as balance;

-- name: add_credits
-- A door (sql/functions/credits.sql): a grant, or a debit of a job of the tenant.
select id from fairqueue.credit_entry(%(tenant_id)s, %(job_id)s, %(kind)s, %(amount)s, %(note)s);

-- name: refund_job
-- A door (sql/functions/credits.sql): pays back a cancelled or failed job's debit once; nothing
-- when it was never charged or already refunded.
select amount from fairqueue.credit_refund(%(tenant_id)s, %(job_id)s, %(note)s);

-- name: stalled_lanes
-- A door (sql/functions/lanes.sql): lanes with queued work and nothing holding them.
select tenant_id, lane from fairqueue.stalled_lanes(%(limit)s);

-- name: lane_history
-- Under the tenant's clamp: a type's first-pass lane jobs, open or finished, in lane order;
-- with since, only those admitted since then.
select lane, id, payload, status, created_at, locked_at as started_at, finished_at
  from fairqueue.all_jobs
 where tenant_id is not distinct from %(tenant_id)s and type = %(type)s and lane is not null and delta_of is null
   and (%(since)s::timestamptz is null or created_at >= %(since)s)
 order by lane, created_at, id;
