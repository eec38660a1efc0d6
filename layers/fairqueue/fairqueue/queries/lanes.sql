-- A lane belongs to a tenant: every lane query names the tenant as well as the row-level
-- security clamp does, so a caller that bypasses RLS (a superuser) still sees one lane.

-- name: lane_lock
-- The two-key advisory lock form: its key space does not overlap the one-key form's.
select pg_advisory_xact_lock(%(namespace)s, hashtext(%(key)s));

-- name: new_job_id
-- The admitted job's id, drawn before its insert: a stage's upstream is given it as the held
-- work's key. Time-ordered like every job's (sql/functions/job_ids.sql).
select fairqueue.new_job_id() as id;

-- name: lane_busy
-- Under the tenant's clamp: does the lane already have first-pass work queued, pending or running?
select exists (
    select 1 from fairqueue.jobs
     where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s and delta_of is null
       and status in ('queued', 'pending', 'running')
) as busy;

-- name: delta_target
-- Under the tenant's clamp: the earlier job a delta re-checks, if it is in this lane, open or
-- finished.
select exists (
    select 1 from fairqueue.all_jobs where id = %(id)s and tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s
) as found;

-- name: lane_job
-- Under the tenant's clamp: one job of the lane, and its place in it: 1 holds the lane (a delta
-- is always 1), n waits behind n - 1 first-pass jobs, a finished job has none. What admission
-- reports and what the API shows of a job.
select j.id, j.type, j.status, j.lane, j.delta_of, j.attempts, j.created_at, j.finished_at,
       j.last_error, j.output,
       case
           when j.status not in ('queued', 'pending', 'running') then null
           when j.delta_of is not null then 1
           else (select count(*)
                   from fairqueue.jobs o
                  where o.tenant_id is not distinct from j.tenant_id and o.lane = j.lane
                    and o.delta_of is null
                    and o.status in ('queued', 'pending', 'running')
                    and (o.created_at, o.id) <= (j.created_at, j.id))
       end as place
  from fairqueue.all_jobs j
 where j.id = %(id)s and j.tenant_id is not distinct from %(tenant_id)s and j.lane = %(lane)s;

-- name: dedupe_taken
-- Under the tenant's clamp: does an open job of the tenant already have the dedupe key? Asked
-- before an upstream is asked to hold work, so a duplicate leaves nothing held there.
select exists (
    select 1 from fairqueue.jobs
     where coalesce(tenant_id, '') = coalesce(%(tenant_id)s, '')
       and tenant_id is not distinct from %(tenant_id)s
       and dedupe_key = %(dedupe_key)s
       and status in ('queued', 'pending', 'running')
) as taken;

-- name: admit_job
-- created_at is read after the lane's lock was taken, so the lane's order is admission order
-- (now() would be when the transaction began, before it waited for the lock).
insert into fairqueue.jobs (id, type, payload, tenant_id, group_id, dedupe_key, max_attempts,
                            lane, delta_of, credit_cost, upstream_id, status, created_at)
values (%(id)s, %(type)s, %(payload)s, %(tenant_id)s, %(group_id)s, %(dedupe_key)s,
        %(max_attempts)s, %(lane)s, %(delta_of)s, %(cost)s, %(upstream_id)s, %(status)s,
        clock_timestamp())
on conflict (coalesce(tenant_id, ''), dedupe_key)
   where dedupe_key is not null and status in ('queued', 'pending', 'running')
   do nothing
returning id, status;

-- name: promote_next
-- Under the lane's lock and the tenant's clamp: the oldest queued first-pass job becomes
-- pending, unless a first-pass job already holds the lane.
update fairqueue.jobs
   set status = 'pending', run_after = now()
 where id = (select id from fairqueue.jobs
              where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s and delta_of is null
                and status = 'queued'
              order by created_at, id
              limit 1)
   and not exists (select 1 from fairqueue.jobs
                    where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s and delta_of is null
                      and status in ('pending', 'running'))
returning id, type;

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
select coalesce(sum(amount), 0) as balance
  from fairqueue.credits
 where tenant_id is not distinct from %(tenant_id)s;

-- name: add_credits
insert into fairqueue.credits (tenant_id, job_id, kind, amount, note)
values (%(tenant_id)s, %(job_id)s, %(kind)s, %(amount)s, %(note)s)
on conflict (job_id, kind) where kind <> 'grant' do nothing
returning id;

-- name: refund_job
-- Pays back a job's debit once; nothing when it was never charged or already refunded.
insert into fairqueue.credits (tenant_id, job_id, kind, amount, note)
select tenant_id, job_id, 'refund', -amount, %(note)s
  from fairqueue.credits
 where job_id = %(job_id)s and kind = 'debit' and tenant_id is not distinct from %(tenant_id)s
on conflict (job_id, kind) where kind <> 'grant' do nothing
returning amount;

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
