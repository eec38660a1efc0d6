-- Due doorbell jobs whose last ring is older than p_stale: ids and tenants only.
create or replace function fairqueue.stale_doorbells_unchecked(
    p_types text[],
    p_stale interval,
    p_limit integer
) returns table (
    id uuid, tenant_id text)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select j.id, j.tenant_id
  from fairqueue.jobs j
 where j.type = any(p_types)
   and j.status = 'pending'
   and j.run_after <= now()
   and coalesce(j.rung_at, j.created_at) < now() - p_stale
 order by j.run_after
 limit p_limit
$$;

alter function fairqueue.stale_doorbells_unchecked(text[], interval,
    integer) owner to fairqueue_owner;
revoke all on function fairqueue.stale_doorbells_unchecked(text[], interval, integer) from public,
    fairqueue_app;

-- The door: checks the arguments, then runs stale_doorbells_unchecked as the owner.
create or replace function fairqueue.stale_doorbells(
    p_types text[],
    p_stale interval,
    p_limit integer
) returns table (
    id uuid, tenant_id text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('stale_doorbells: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.stale_doorbells_unchecked(p_types,
    fairqueue.door_duration('stale_doorbells', 'the staleness', p_stale, interval '0',
                            interval '1 day'), p_limit);
$$;

alter function fairqueue.stale_doorbells(text[], interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.stale_doorbells(text[], interval, integer) from public,
    fairqueue_app;
grant execute on function fairqueue.stale_doorbells(text[], interval, integer) to fairqueue_app;

-- Records that these pending jobs' doorbells rang now; how many it marked.
create or replace function fairqueue.mark_rung(p_ids uuid[]) returns integer
language sql security definer set search_path = pg_catalog, pg_temp
as $$
with rung as (
    update fairqueue.jobs set rung_at = now()
     where id = any(p_ids) and status = 'pending'
    returning 1
)
select count(*)::integer from rung
$$;

alter function fairqueue.mark_rung(uuid[]) owner to fairqueue_owner;
revoke all on function fairqueue.mark_rung(uuid[]) from public, fairqueue_app;
grant execute on function fairqueue.mark_rung(uuid[]) to fairqueue_app;
