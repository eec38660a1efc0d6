-- Both statements run under the job's tenant clamp and name the tenant as well, as lanes.sql
-- does: a login that bypasses row-level security (a superuser) still touches one tenant's rows.

-- name: mark_released
-- Under the tenant's clamp: the job's held upstream work has been started.
update fairqueue.jobs
   set released_at = now(), release_failing_since = null
 where id = %(id)s and tenant_id is not distinct from %(tenant_id)s and released_at is null
returning id;

-- name: release_failed
-- Under the tenant's clamp, for a job this claimer holds. Not an attempt: the claim's increment
-- is undone. Inside the window (from the first failed try) the job waits for its next try;
-- past it the job fails for good.
with failing as (
    select id, now() - coalesce(release_failing_since, now())
                 >= %(window_s)s * interval '1 second' as window_passed
      from fairqueue.jobs
     where id = %(id)s and tenant_id is not distinct from %(tenant_id)s
       and status = 'running' and locked_by = %(locked_by)s
)
update fairqueue.jobs j
   set release_tries = j.release_tries + 1,
       release_failing_since = coalesce(j.release_failing_since, now()),
       attempts = greatest(j.attempts - 1, 0),
       lease_until = null,
       last_error = %(error)s,
       status = case when f.window_passed then 'failed' else 'pending' end,
       finished_at = case when f.window_passed then now() end,
       give_up_owed = f.window_passed,
       run_after = case when f.window_passed then j.run_after
                        else now() + %(delay_s)s * interval '1 second' end
  from failing f
 where j.id = f.id and j.tenant_id is not distinct from %(tenant_id)s
returning j.id, j.status, j.run_after;
