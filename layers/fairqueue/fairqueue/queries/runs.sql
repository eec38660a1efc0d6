-- name: open_run
insert into fairqueue.runs (trigger, summary)
values (%(trigger)s, %(summary)s)
returning id, started_at;

-- name: close_run
update fairqueue.runs
   set stop_reason = %(stop_reason)s,
       jobs_done = %(jobs_done)s,
       jobs_failed = %(jobs_failed)s,
       jobs_deferred = %(jobs_deferred)s,
       quota_units = %(quota_units)s,
       summary = summary || %(summary)s,
       error = %(error)s,
       finished_at = now()
 where id = %(id)s and finished_at is null
returning id;

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
