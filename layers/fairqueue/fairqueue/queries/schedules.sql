-- name: schedule_add
select clamped_to, system, matches, id
  from fairqueue.schedule_add(%(tenant_id)s, %(name)s, %(job_type)s, %(cron)s, %(every_s)s,
                              %(timezone)s, %(payload)s::jsonb, %(group_id)s, %(max_attempts)s,
                              %(catch_up)s, %(next_tick_at)s);

-- name: schedule_set_paused
select clamped_to, system, matches, id
  from fairqueue.schedule_set_paused(%(tenant_id)s, %(name)s, %(paused)s, %(next_tick_at)s);

-- name: schedule_remove
select clamped_to, system, matches, id from fairqueue.schedule_remove(%(tenant_id)s, %(name)s);

-- name: schedule_rows
-- Under the tenant's clamp: its schedules (one, by name, when a name is given), with the state
-- of the last job a tick made, wherever that job is now.
select s.id, s.tenant_id, s.name, s.job_type, s.cron, s.every_s, s.timezone, s.payload,
       s.group_id, s.max_attempts, s.catch_up, s.declared, s.paused, s.next_tick_at,
       s.last_tick_at, s.last_job_id, j.status as last_job_status, s.created_at
  from fairqueue.schedules s
  left join fairqueue.all_jobs j on j.id = s.last_job_id
 where coalesce(s.tenant_id, '') = coalesce(%(tenant_id)s, '')
   and (%(name)s::text is null or s.name = %(name)s)
 order by s.name;

-- name: find_schedules
select id, tenant_id from fairqueue.find_schedules(%(tenant_id)s, %(name)s, %(limit)s);

-- name: sweep_now
-- The sweep's transaction's time: the now() schedules_due compares next ticks with.
select now() as now;

-- name: schedules_due
select id, cron, every_s, timezone, next_tick_at, catch_up
  from fairqueue.schedules_due(%(limit)s);

-- name: schedule_ticks
select id, tenant_id, type
  from fairqueue.schedule_ticks(%(ids)s, %(was)s, %(next)s, %(last)s, %(tick_ids)s,
                                %(tick_ats)s);

-- name: schedules_declare
select changed, removed from fairqueue.schedules_declare(%(declared)s::jsonb);

-- name: schedule_of_job
-- Under the job's tenant clamp: the schedule whose tick made a job with this dedupe key.
select s.name, s.id
  from fairqueue.schedules s
 where s.id = fairqueue.schedule_of_tick_key(%(dedupe_key)s);
