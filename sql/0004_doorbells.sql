-- Doorbells: the job row is the outbox. rung_at is when the sweeper last rang a job's doorbell;
-- a doorbell stage's job still pending and due a while after its last ring (or its creation)
-- is rung again, so a doorbell lost anywhere costs a delay, never the job.

alter table fairqueue.jobs add column rung_at timestamptz;

-- Due doorbell jobs whose last ring is older than p_stale: ids and tenants only.
create function fairqueue.stale_doorbells(p_types text[], p_stale interval, p_limit integer)
returns table (id uuid, tenant_id text)
language sql stable security definer set search_path = pg_catalog, pg_temp
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

create function fairqueue.mark_rung(p_ids uuid[]) returns integer
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
with rung as (
    update fairqueue.jobs set rung_at = now()
     where id = any(p_ids) and status = 'pending'
    returning 1
)
select count(*)::integer from rung
$$;

alter function fairqueue.stale_doorbells(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.mark_rung(uuid[]) owner to fairqueue_owner;
revoke execute on function fairqueue.stale_doorbells(text[], interval, integer),
    fairqueue.mark_rung(uuid[]) from public;
grant execute on function fairqueue.stale_doorbells(text[], interval, integer),
    fairqueue.mark_rung(uuid[]) to fairqueue_app;
