-- A result row is for a job of its own tenant (the trigger results_job, sql/functions/results.sql).
-- Before it, a transaction clamped to one tenant could insert a row under another tenant's job
-- id first, and that job's own saves then failed for good. Such a row is no one's result: its
-- job is another tenant's, which admission never lets a job's original be. Dropped here, so the
-- job's owner can save its result; rows whose job has gone (retention) stay as they are.
delete from fairqueue.results r
 using fairqueue.all_jobs j
 where j.id = r.job_id
   and j.tenant_id is distinct from r.tenant_id;
