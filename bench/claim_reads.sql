-- What a claim read, as the server counts it for the transaction: the entries its index scans
-- returned from each table's indexes and the rows of any scan of the table itself, all loops.
-- The table's own fetch count would miss most of it: an index-only scan, a lock and an update by
-- ctid count nothing there. Read before and after the claim; the bench's claim-latency table
-- and the query-plan tests (tests/schema/test_query_plans.py) both bound a claim by it.
select coalesce(sum(pg_stat_get_xact_tuples_returned(c.oid))
                    filter (where t.relname = 'jobs'), 0) as jobs,
       coalesce(sum(pg_stat_get_xact_tuples_returned(c.oid))
                    filter (where t.relname = 'served'), 0) as served,
       coalesce(sum(pg_stat_get_xact_tuples_returned(c.oid))
                    filter (where t.relname = 'tenant_standings'), 0) as tenants
  from pg_class t
  join pg_class c
    on c.oid = t.oid or c.oid in (select i.indexrelid from pg_index i where i.indrelid = t.oid)
 where t.oid in ('fairqueue.jobs'::regclass, 'fairqueue.served'::regclass,
                 'fairqueue.tenant_standings'::regclass)
