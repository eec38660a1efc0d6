-- Both statements run under the job's tenant clamp and name the tenant as well, as lanes.sql
-- does: a login that bypasses row-level security (a superuser) still touches one tenant's rows.

-- name: mark_released
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp: the job's held upstream work has
-- been started.
select id from fairqueue.job_released(%(id)s, %(tenant_id)s);

-- name: release_failed
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp, for a job this claimer holds.
-- Not an attempt: the claim's increment is undone. Inside the window (from the first failed try)
-- the job waits for its next try; past it the job fails for good.
select id, status, run_after
  from fairqueue.job_release_failed(%(id)s, %(tenant_id)s, %(locked_by)s, %(error)s,
                                    %(window_s)s, %(delay_s)s);
