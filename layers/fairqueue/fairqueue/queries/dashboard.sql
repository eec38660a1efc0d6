-- The operators' dashboard (fairqueue.dashboard): its doors (sql/functions/dashboard.sql) and
-- the runs table, which the application role reads.

-- name: dashboard_service
select * from fairqueue.dashboard_service(%(limit)s);

-- name: dashboard_most_served
select * from fairqueue.dashboard_most_served(%(limit)s);

-- name: dashboard_backlog
select * from fairqueue.dashboard_backlog();

-- name: dashboard_waiting
select * from fairqueue.dashboard_waiting(%(limit)s);

-- name: dashboard_groups
select * from fairqueue.dashboard_groups(%(limit)s);

-- name: dashboard_balances
select * from fairqueue.dashboard_balances(%(limit)s);

-- name: dashboard_run_hours
-- The last day's runs by the hour they started and how they stopped (null: still open), with
-- the jobs they finished: the overview's timeline and throughput.
select date_trunc('hour', started_at) as hour, stop_reason, count(*) as runs,
       sum(jobs_done) as jobs_done, sum(jobs_failed) as jobs_failed
  from fairqueue.runs
 where started_at > now() - interval '1 day'
 group by 1, 2
 order by 1, 2;
