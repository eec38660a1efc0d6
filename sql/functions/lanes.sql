-- A door for the sweeper: lanes whose first-pass work waits although nothing holds the lane
-- (a finalization whose promotion never ran). Tenants and lane keys only.
create or replace function fairqueue.stalled_lanes_unchecked(p_limit integer) returns table (
    tenant_id text, lane text)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select q.tenant_id, q.lane
  from fairqueue.jobs q
 where q.status = 'queued' and q.lane is not null and q.delta_of is null
   and not exists (select 1 from fairqueue.jobs h
                    where h.tenant_id is not distinct from q.tenant_id and h.lane = q.lane
                      and h.delta_of is null and h.status in ('pending', 'running'))
 group by q.tenant_id, q.lane
 limit p_limit
$$;

alter function fairqueue.stalled_lanes_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.stalled_lanes_unchecked(integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs stalled_lanes_unchecked as the owner.
create or replace function fairqueue.stalled_lanes(p_limit integer) returns table (
    tenant_id text, lane text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('stalled_lanes: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.stalled_lanes_unchecked(p_limit);
$$;

alter function fairqueue.stalled_lanes(integer) owner to fairqueue_owner;
revoke all on function fairqueue.stalled_lanes(integer) from public, fairqueue_app;
grant execute on function fairqueue.stalled_lanes(integer) to fairqueue_app;
