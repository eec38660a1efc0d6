-- The operators' dashboard (fairqueue.dashboard): its doors (sql/functions/dashboard.sql) and
-- the runs table, which the application role reads.

-- name: dashboard_tenants
select * from fairqueue.dashboard_tenants(%(limit)s);

-- name: dashboard_backlog
select * from fairqueue.dashboard_backlog();

-- name: dashboard_plans
select * from fairqueue.dashboard_plans();

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
