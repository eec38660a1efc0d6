-- A batch's reads and completions: one statement per batch, still one tenant's clamp per row.
--
-- The pipeline read its claimed jobs and marked them done with two statements per tenant of the
-- batch (set the clamp, then read or update). A fair batch spans many tenants (about 80 of 100
-- jobs in the benchmark), so a batch cost over 300 statements. The functions below run the same
-- per-tenant statements inside the server: they are SECURITY INVOKER, so row-level security
-- applies to each statement exactly as before, under the clamp of the tenant it works for.
-- Their statements keep one generic plan (a primary-key lookup): left to choose, PL/pgSQL
-- planned each tenant's statement afresh, which cost more than running it.

-- The lease index held `status = 'running'` rows; a read by id that also says
-- `status = 'running'` matched its predicate, and with few running rows in the statistics the
-- planner scanned the whole index (every running row, and the dead entries of every claim
-- since the last vacuum) instead of looking the ids up. The same rows, under a predicate that no
-- status test implies: only the lease searches use it.
drop index if exists fairqueue.jobs_lease_idx;
create index jobs_lease_idx on fairqueue.jobs (type, lease_until) where lease_until is not null;
