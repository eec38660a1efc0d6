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
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp. Backoff counts the attempt the
-- claim already added: 2, then 4, then 8 units (a unit is a minute unless the stage sets another).
select id, status, run_after
  from fairqueue.job_retry_or_fail(%(id)s, %(tenant_id)s, %(locked_by)s, %(error)s, %(unit_s)s);

-- name: fail_now
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp.
select id from fairqueue.job_fail_now(%(id)s, %(tenant_id)s, %(locked_by)s, %(error)s);

-- name: defer
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp. Not an attempt: the claim's
-- increment is undone.
select id, run_after
  from fairqueue.job_defer(%(id)s, %(tenant_id)s, %(locked_by)s, %(until)s::timestamptz);

-- name: give_back
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp. Claimed but never started: back
-- as it was, attempt undone.
select id from fairqueue.jobs_give_back(%(ids)s::uuid[], %(tenant_id)s, %(locked_by)s);

-- name: fail_abandoned
-- A door (sql/functions/abandoned.sql): fails jobs that died on their last attempt, returns their ids.
select id, type, tenant_id, last_error from fairqueue.fail_abandoned(%(types)s, %(limit)s);

-- name: claim_by_ids
-- A burst of doorbells claimed by one door (sql/functions/doorbells.sql), which hands the ids and
-- tenant ids it took to read_claimed, which reads each tenant's jobs under that tenant's clamp:
-- one statement and one round trip, as claim_and_read (sql/order/claim.queries.sql). The columns
-- are claim.ClaimedJob's fields, in their order.
select r.id, r.type, r.payload, r.tenant_id, r.group_id, r.attempts, r.max_attempts, r.lane,
       r.delta_of, r.upstream_id, r.released, r.release_tries
  from (select array_agg(c.tenant_id) as tenant_ids, array_agg(c.id) as ids
          from fairqueue.jobs_claim_by_ids(%(ids)s::uuid[], %(tenant_ids)s::text[],
                                           %(types)s::text[], %(leases)s::float8[],
                                           %(locked_by)s, %(run_id)s, %(plan_names)s,
                                           %(plan_caps)s, %(default_cap)s,
                                           %(cost_types)s::text[]) c) c
 cross join lateral fairqueue.read_claimed(c.tenant_ids, c.ids, %(locked_by)s) r;

-- name: stale_doorbells
-- A door (sql/functions/doorbells.sql): due doorbell jobs whose last ring is stale.
select id, tenant_id from fairqueue.stale_doorbells(%(types)s, %(stale_s)s * interval '1 second', %(limit)s);

-- name: mark_rung
select fairqueue.mark_rung(%(ids)s::uuid[]) as rung;

-- name: lock_owed_give_up
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp, in the transaction the give-up
-- hook runs in: the failed job whose hook is owed, locked; no row when it is not owed, or
-- another process is firing it.
select id from fairqueue.job_lock_owed_give_up(%(id)s, %(tenant_id)s);

-- name: mark_give_up_fired
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp, in the same transaction: the
-- hook ran to its end.
select fairqueue.job_give_up_fired(%(id)s, %(tenant_id)s) as fired;

-- name: due_give_ups
-- A door (sql/functions/give_ups.sql): hooks owed longer than the grace, across tenants.
select id, type, tenant_id, last_error
  from fairqueue.due_give_ups(%(types)s::text[], %(grace_s)s * interval '1 second', %(limit)s);

-- name: settle_spent
-- What a batch's jobs of a stage fair by cost spent becomes what they count as served, before
-- their completion (sql/functions/claimed_batch.sql).
select fairqueue.settle_spent(%(tenant_ids)b::text[], %(ids)b::uuid[], %(units)b::bigint[],
                              %(locked_by)s) as settled;
