-- Every statement below that runs under a tenant's clamp names the tenant as well, as lanes.sql
-- does: a login that bypasses row-level security (a superuser) still touches one tenant's rows.
-- tenant_id is NULL for a system job, hence `is not distinct from`.

-- name: read_jobs
-- Under the tenant's clamp, whatever their status (a failed job for its give-up hook).
select id, type, payload, tenant_id, group_id, attempts, max_attempts, lane, delta_of,
       upstream_id, released_at is not null as released, release_tries
  from fairqueue.jobs
 where id = any(%(ids)s::uuid[]) and tenant_id is not distinct from %(tenant_id)s;

-- name: complete_claimed
-- A batch's jobs marked done with their outputs, each under its own tenant's clamp
-- (sql/functions/claimed_batch.sql). The batch's arrays go in binary (b), here and in
-- extend_leases: the text form has psycopg test every element for quoting.
select id from fairqueue.complete_claimed(%(tenant_ids)b::text[], %(ids)b::uuid[],
                                          %(outputs)b::jsonb[], %(locked_by)s);

-- name: complete_claimed_count
-- The same, answering only how many were still this claimer's: a batch with no follow-ups needs
-- no more, and a hundred ids sent back and parsed cost the client more than the count.
select count(*) as done
  from fairqueue.complete_claimed(%(tenant_ids)b::text[], %(ids)b::uuid[], %(outputs)b::jsonb[],
                                  %(locked_by)s);

-- name: extend_leases
-- The leases of a batch's jobs still running, one statement for the batch through a door that
-- names each job's tenant and claimer (sql/functions/claimed_batch.sql).
select fairqueue.extend_leases(%(tenant_ids)b::text[], %(ids)b::uuid[], %(locked_by)s,
                               %(lease_s)s) as extended;

-- name: retry_or_fail
-- Under the tenant's clamp. Backoff counts the attempt the claim already added: 2, then 4,
-- then 8 units (a unit is a minute unless the stage sets another).
update fairqueue.jobs
   set status = case when attempts >= max_attempts then 'failed' else 'pending' end,
       run_after = case when attempts >= max_attempts then run_after
                        else now() + power(2, attempts) * %(unit_s)s * interval '1 second' end,
       finished_at = case when attempts >= max_attempts then now() end,
       give_up_owed = attempts >= max_attempts,
       lease_until = null,
       last_error = %(error)s
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
   and status = 'running' and locked_by = %(locked_by)s
returning id, status, run_after;

-- name: fail_now
-- Under the tenant's clamp.
update fairqueue.jobs
   set status = 'failed', give_up_owed = true, finished_at = now(), lease_until = null,
       last_error = %(error)s
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
   and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: defer
-- Under the tenant's clamp. Not an attempt: the claim's increment is undone.
update fairqueue.jobs
   set status = 'pending',
       run_after = greatest(%(until)s::timestamptz, now()),
       attempts = greatest(attempts - 1, 0),
       lease_until = null
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
   and status = 'running' and locked_by = %(locked_by)s
returning id, run_after;

-- name: give_back
-- Under the tenant's clamp. Claimed but never started: back as it was, attempt undone.
update fairqueue.jobs
   set status = 'pending', attempts = greatest(attempts - 1, 0), lease_until = null
 where id = any(%(ids)s::uuid[]) and tenant_id is not distinct from %(tenant_id)s
   and status = 'running' and locked_by = %(locked_by)s
returning id;

-- name: fail_abandoned
-- A door (sql/functions/abandoned.sql): fails jobs that died on their last attempt, returns their ids.
select id, type, tenant_id, last_error from fairqueue.fail_abandoned(%(types)s, %(limit)s);

-- name: claim_by_id
-- Under the doorbell's tenant clamp: only a pending, due job of that tenant, of a type this
-- worker runs, outside a paused group. A duplicate, late or mismatched doorbell claims nothing.
-- The worker's transaction holds this statement alone, so a claim commits without waiting for
-- its WAL to reach disk, as claim_and_read's own transaction does (docs/design/claim.md, "A claim
-- commits without waiting for the disk"): set in the returning list, so only when a job is taken.
update fairqueue.jobs j
   set status = 'running',
       attempts = j.attempts + 1,
       locked_at = now(),
       lease_until = now() + lease.seconds * interval '1 second',
       locked_by = %(locked_by)s,
       run_id = %(run_id)s
  from unnest(%(types)s::text[], %(leases)s::float8[]) as lease (type, seconds)
 where j.id = %(id)s
   and j.tenant_id is not distinct from %(tenant_id)s
   and j.type = lease.type
   and j.status = 'pending'
   and j.run_after <= now()
   and not exists (select 1 from fairqueue.groups g
                    where g.key = j.group_key and g.tenant_id is not distinct from %(tenant_id)s
                      and g.status = 'paused')
returning j.id, j.type, j.payload, j.tenant_id, j.group_id, j.attempts, j.max_attempts, j.lane,
          j.delta_of, j.upstream_id, j.released_at is not null as released, j.release_tries,
          set_config('synchronous_commit', 'off', true) as commit_quickly;

-- name: stale_doorbells
-- A door (sql/functions/doorbells.sql): due doorbell jobs whose last ring is stale.
select id, tenant_id from fairqueue.stale_doorbells(%(types)s, %(stale_s)s * interval '1 second', %(limit)s);

-- name: mark_rung
select fairqueue.mark_rung(%(ids)s::uuid[]) as rung;

-- name: lock_owed_give_up
-- Under the tenant's clamp, in the transaction the give-up hook runs in: the failed job whose
-- hook is owed, locked; no row when it is not owed, or another process is firing it.
select id
  from fairqueue.jobs
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
   and status = 'failed' and give_up_owed
   for update skip locked;

-- name: mark_give_up_fired
-- Under the tenant's clamp, in the same transaction: the hook ran to its end.
update fairqueue.jobs
   set give_up_owed = false
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
   and status = 'failed' and give_up_owed;

-- name: due_give_ups
-- A door (sql/functions/give_ups.sql): hooks owed longer than the grace, across tenants.
select id, type, tenant_id, last_error
  from fairqueue.due_give_ups(%(types)s::text[], %(grace_s)s * interval '1 second', %(limit)s);
