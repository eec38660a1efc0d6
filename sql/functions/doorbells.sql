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

-- Doorbells' jobs claimed, one doorbell or a burst in one statement: each doorbell (p_ids and
-- p_tenant_ids in step) takes only a pending, due job of its tenant, of a type the worker runs
-- (each type's lease in p_leases), outside a paused group; then it is running, one attempt more,
-- leased to p_locked_by. A duplicate, late or foreign doorbell takes nothing. A caller whose
-- transaction is clamped takes only doorbells inside its clamp. Rows another transaction has locked
-- are passed over rather than waited for: whoever holds them is changing them, and two workers that
-- heard the same burst never wait on each other (nor deadlock, locking in different orders). When
-- it takes a job, the transaction commits without waiting for its WAL to reach disk, as every
-- claim's does. Ids and tenants only: the caller reads the rest under each tenant's clamp
-- (read_claimed).
--
-- A tenant on a capped plan (p_plan_caps beside p_plan_names, p_default_cap for a plan not named:
-- sql/order/caps.sql) takes no more of a type's jobs than its room; a doorbell past it, or for a
-- tenant another claimer is claiming for at that moment, takes nothing, and its job stays pending
-- for the cron's claim.
--
-- A job of a type in p_cost_types (Stage(fair_by="cost")) counts its cost as served from its
-- claim on, any other one (`counted`), as the cron's claim counts them (sql/order/claim.sql).
create or replace function fairqueue.jobs_claim_by_ids(p_ids uuid[], p_tenant_ids text[],
    p_types text[], p_leases double precision[], p_locked_by text, p_run_id uuid,
    p_plan_names text[], p_plan_caps integer[], p_default_cap integer, p_cost_types text[])
returns table (id uuid, tenant_id text)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    unclamped constant boolean := fairqueue.clamped_to_no_one();
    room_types text[] := '{}';
    room_keys text[] := '{}';
    rooms integer[] := '{}';
    past_room uuid[] := '{}';
begin
    perform fairqueue.door_argument(
        cardinality(p_ids) = cardinality(p_tenant_ids) and cardinality(p_ids) <= 10000,
        'jobs_claim_by_ids: one tenant id for each job id, at most 10000 of them');
    perform fairqueue.door_argument(
        cardinality(p_types) = cardinality(p_leases)
            and coalesce((select bool_and(s > 0 and s <= 86400) from unnest(p_leases) s), true),
        'jobs_claim_by_ids: each type needs a lease over 0 and at most 86400 seconds');
    perform fairqueue.door_argument(coalesce(length(p_locked_by), 0) between 1 and 200,
        'jobs_claim_by_ids: locked_by must be 1 to 200 characters');
    perform fairqueue.door_caps_arguments('jobs_claim_by_ids', p_plan_names, p_plan_caps,
                                          p_default_cap);
    perform fairqueue.door_argument(p_cost_types is not null,
        'jobs_claim_by_ids: the types counted by cost must be a list, empty for none');
    if fairqueue.any_cap(p_plan_caps, p_default_cap) then
        select coalesce(array_agg(r.type), '{}'), coalesce(array_agg(r.tenant_key), '{}'),
               coalesce(array_agg(r.room), '{}')
          into room_types, room_keys, rooms
          from (select array_agg(j.type) as types,
                       array_agg(fairqueue.group_tenant_key(j.group_key)) as keys,
                       array_agg(coalesce(t.plan, '')) as plans
                  from fairqueue.jobs j
                  left join fairqueue.tenants t on t.id = j.tenant_id
                 where j.id = any(p_ids) and j.status = 'pending'
                   and j.type = any(p_types)) met
         cross join lateral fairqueue.tenant_rooms(
                   coalesce(met.types, '{}'), coalesce(met.keys, '{}'),
                   coalesce(met.plans, '{}'), p_plan_names, p_plan_caps, p_default_cap,
                   false) r;
        -- A capped tenant's doorbells of a type past its room (by job id), left out before any
        -- row is locked, so that none is locked and not taken.
        select coalesce(array_agg(c.id), '{}') into past_room
          from (select j.id, r.room,
                       row_number() over (partition by r.type, r.tenant_key order by j.id) as nth
                  from fairqueue.jobs j
                  join unnest(room_types, room_keys, rooms) as r (type, tenant_key, room)
                    on r.type = j.type
                   and r.tenant_key = fairqueue.group_tenant_key(j.group_key)
                 where j.id = any(p_ids) and j.status = 'pending'
                   and j.run_after <= now()) c
         where c.nth > c.room;
    end if;
    return query
    with doorbell as (
        select distinct d.id, d.tenant_id
          from unnest(p_ids, p_tenant_ids) as d (id, tenant_id)
         where unclamped or fairqueue.within_clamp(d.tenant_id)
    ), claimable as (
        select j.id, lease.seconds
          from fairqueue.jobs j
          join doorbell d on d.id = j.id and d.tenant_id is not distinct from j.tenant_id
          join unnest(p_types, p_leases) as lease (type, seconds) on lease.type = j.type
         where j.status = 'pending'
           and j.run_after <= now()
           and not exists (select 1 from fairqueue.groups g
                            where g.key = j.group_key
                              and g.tenant_id is not distinct from j.tenant_id
                              and g.status = 'paused')
           and j.id <> all(past_room)
         order by j.id
           for update of j skip locked
    )
    update fairqueue.jobs j
       set status = 'running',
           attempts = j.attempts + 1,
           locked_at = now(),
           lease_until = now() + c.seconds * interval '1 second',
           locked_by = p_locked_by,
           run_id = p_run_id,
           counted = case when j.type = any(p_cost_types) then j.cost else 1 end
      from claimable c
     where j.id = c.id
    returning j.id, j.tenant_id;
    if found then
        perform set_config('synchronous_commit', 'off', true);
    end if;
end $$;
alter function fairqueue.jobs_claim_by_ids(uuid[], text[], text[], double precision[], text, uuid,
    text[], integer[], integer, text[]) owner to fairqueue_owner;
revoke all on function fairqueue.jobs_claim_by_ids(uuid[], text[], text[], double precision[],
    text, uuid, text[], integer[], integer, text[]) from public, fairqueue_app;
grant execute on function fairqueue.jobs_claim_by_ids(uuid[], text[], text[], double precision[],
    text, uuid, text[], integer[], integer, text[]) to fairqueue_app;
