-- The named queries the library sends to the order (fairqueue.queries reads every
-- sql/order/*.queries.sql as it reads queries/*.sql): the claims, what runs before them, and
-- whether a type has work to claim. The claims are doors; their reads of the claimed jobs run
-- under each tenant's clamp (read_claimed, sql/functions/claimed_batch.sql).

-- name: expire_served
-- The sweeper's: moves the served window's edge up to now() - 1 day, skipped while it is less
-- than a second stale (sql/order/served.sql).
select fairqueue.expire_served_when_stale();

-- name: ready_for_claim
-- Before each claim (sql/order/claim.sql): fresh statistics after a bulk enqueue, the served
-- window's edge moved up and the type's quanta stamped, committed on their own before the
-- claim starts.
select fairqueue.ready_for_claim(%(type)s, %(plan_names)s, %(plan_quanta)s,
                                 %(default_quantum)s);

-- name: claim_batch
-- The fair claim is a door (sql/order/claim.sql): ids and tenant ids only.
select id, tenant_id
  from fairqueue.claim(%(type)s, %(batch)s, %(lease_s)s, %(locked_by)s, %(run_id)s,
                       %(plan_names)s, %(plan_priorities)s, %(default_priority)s,
                       %(plan_quanta)s, %(default_quantum)s, %(plan_caps)s,
                       %(default_cap)s, %(by_cost)s);

-- name: claim_and_read
-- The fair claim and the read of what it took, one statement: the claim (the door above) hands
-- its ids and tenant ids to read_claimed, which reads each tenant's jobs under that tenant's
-- clamp. One round trip instead of two, and the claim commits only with its read. The columns
-- are claim.ClaimedJob's fields, in their order: each row is made into one directly.
-- When the statement is its own transaction (quick_commit), that transaction commits without
-- waiting for its WAL to reach disk (docs/design/claim.md, "A claim commits without waiting for the
-- disk"). Set in the one-row aggregation, so it is set once; a volatile column is never dropped.
select r.id, r.type, r.payload, r.tenant_id, r.group_id, r.attempts, r.max_attempts, r.lane,
       r.delta_of, r.upstream_id, r.released, r.release_tries
  from (select array_agg(c.tenant_id) as tenant_ids, array_agg(c.id) as ids,
               case when %(quick_commit)s
                    then set_config('synchronous_commit', 'off', true) end as commit_quickly
          from fairqueue.claim(%(type)s, %(batch)s, %(lease_s)s, %(locked_by)s, %(run_id)s,
                               %(plan_names)s, %(plan_priorities)s, %(default_priority)s,
                               %(plan_quanta)s, %(default_quantum)s, %(plan_caps)s,
                               %(default_cap)s, %(by_cost)s) c) c
 cross join lateral fairqueue.read_claimed(c.tenant_ids, c.ids, %(locked_by)s) r;

-- name: claim_and_read_by_tenant
-- The same at the tenant level.
select r.id, r.type, r.payload, r.tenant_id, r.group_id, r.attempts, r.max_attempts, r.lane,
       r.delta_of, r.upstream_id, r.released, r.release_tries
  from (select array_agg(c.tenant_id) as tenant_ids, array_agg(c.id) as ids,
               case when %(quick_commit)s
                    then set_config('synchronous_commit', 'off', true) end as commit_quickly
          from fairqueue.claim_by_tenant(%(type)s, %(batch)s, %(lease_s)s, %(locked_by)s,
                                         %(run_id)s, %(plan_names)s, %(plan_priorities)s,
                                         %(default_priority)s, %(plan_quanta)s,
                                         %(default_quantum)s, %(plan_caps)s,
                                         %(default_cap)s, %(by_cost)s) c) c
 cross join lateral fairqueue.read_claimed(c.tenant_ids, c.ids, %(locked_by)s) r;

-- name: has_claimable
select fairqueue.has_claimable(%(type)s) as claimable;
