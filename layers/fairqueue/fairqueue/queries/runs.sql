-- name: open_run
-- A door (sql/functions/runs.sql): the application role cannot write runs itself.
select id, started_at from fairqueue.open_run(%(trigger)s, %(summary)s);

-- name: close_run
-- A door (sql/functions/runs.sql): closes an open run once; no row when it was closed.
select id
  from fairqueue.close_run(%(id)s, %(stop_reason)s, %(jobs_done)s, %(jobs_failed)s,
                           %(jobs_deferred)s, %(quota_units)s, %(summary)s, %(error)s);

-- name: recent_runs
select id, trigger, stop_reason, jobs_done, jobs_failed, jobs_deferred, quota_units, error,
       started_at, finished_at, summary
  from fairqueue.runs
 order by started_at desc
 limit %(limit)s;

-- name: get_run
select id, trigger, stop_reason, jobs_done, jobs_failed, jobs_deferred, quota_units, error,
       started_at, finished_at, summary
  from fairqueue.runs
 where id = %(id)s;

-- name: close_abandoned_runs
-- A door (sql/functions/runs.sql): closes the runs open longer than any invocation lives.
select fairqueue.close_abandoned_runs(%(after_s)s * interval '1 second') as closed;
