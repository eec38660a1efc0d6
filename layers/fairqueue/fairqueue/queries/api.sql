-- A lane belongs to a tenant: these queries name the tenant as well as the row-level security
-- clamp does, so a caller that bypasses RLS (a superuser) still sees one tenant's lane.

-- name: api_job
-- Under the tenant's clamp: one job of the caller's lane. Its place is counted as lane_place
-- (lanes.sql) counts it: 1 holds the lane, a delta is always 1, a finished job has none.
select j.id, j.type, j.status, j.lane, j.delta_of, j.attempts, j.created_at, j.finished_at,
       j.last_error, j.output,
       case
           when j.status not in ('queued', 'pending', 'running') then null
           when j.delta_of is not null then 1
           else (select count(*)
                   from fairqueue.jobs o
                  where o.tenant_id is not distinct from j.tenant_id and o.lane = j.lane
                    and o.delta_of is null
                    and o.status in ('queued', 'pending', 'running')
                    and (o.created_at, o.id) <= (j.created_at, j.id))
       end as place
  from fairqueue.jobs j
 where j.id = %(id)s and j.tenant_id is not distinct from %(tenant_id)s and j.lane = %(lane)s;

-- name: api_lane_jobs
-- Under the tenant's clamp: the lane's open jobs in lane_jobs' order (lanes.sql), each with
-- the place api_job gives it.
select id, type, status, lane, delta_of, attempts, created_at, finished_at, last_error, output,
       case
           when delta_of is not null then 1
           else row_number() over (partition by delta_of is null order by created_at, id)
       end as place
  from fairqueue.jobs
 where tenant_id is not distinct from %(tenant_id)s and lane = %(lane)s
   and status in ('queued', 'pending', 'running')
 order by (delta_of is not null), created_at, id;
