-- Claimed jobs, read tenant by tenant under each tenant's clamp: those this claimer still holds.
create or replace function fairqueue.read_claimed(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text
) returns table (
    id uuid, type text, payload jsonb, tenant_id text, group_id text, attempts integer,
    max_attempts integer, lane text, delta_of uuid, upstream_id text, released boolean,
    release_tries integer)
language plpgsql set plan_cache_mode = force_generic_plan
as $$
declare
    owner record;
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
begin
    for owner in
        select c.tenant_id, array_agg(c.id) as ids
          from unnest(p_tenant_ids, p_ids) as c (tenant_id, id)
         group by c.tenant_id
    loop
        perform fairqueue.clamp(owner.tenant_id);
        return query
            select j.id, j.type, j.payload, j.tenant_id, j.group_id, j.attempts, j.max_attempts,
                   j.lane, j.delta_of, j.upstream_id, j.released_at is not null, j.release_tries
              from fairqueue.jobs j
             where j.id = any(owner.ids) and j.tenant_id is not distinct from owner.tenant_id
               and j.status = running_status and j.locked_by = p_locked_by;
    end loop;
    perform fairqueue.unclamp();
end $$;
alter function fairqueue.read_claimed(text[], uuid[], text) owner to fairqueue_owner;
revoke all on function fairqueue.read_claimed(text[], uuid[], text) from public, fairqueue_app;
grant execute on function fairqueue.read_claimed(text[], uuid[], text) to fairqueue_app;

-- Claimed jobs marked done with their outputs, tenant by tenant under each tenant's clamp: the
-- ids that were still this claimer's.
create or replace function fairqueue.complete_claimed(
    p_tenant_ids text[],
    p_ids uuid[],
    p_outputs jsonb[],
    p_locked_by text
) returns table (
    id uuid)
language plpgsql set plan_cache_mode = force_generic_plan
as $$
declare
    owner record;
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
begin
    for owner in
        select c.tenant_id, array_agg(c.id) as ids, array_agg(c.output) as outputs
          from unnest(p_tenant_ids, p_ids, p_outputs) as c (tenant_id, id, output)
         group by c.tenant_id
    loop
        perform fairqueue.clamp(owner.tenant_id);
        return query
            update fairqueue.jobs j
               set status = 'done', finished_at = now(), lease_until = null, last_error = null,
                   output = o.output
              from unnest(owner.ids, owner.outputs) as o (id, output)
             where j.id = o.id and j.tenant_id is not distinct from owner.tenant_id
               and j.status = running_status and j.locked_by = p_locked_by
            returning j.id;
    end loop;
    perform fairqueue.unclamp();
end $$;
alter function fairqueue.complete_claimed(text[], uuid[], jsonb[], text) owner to fairqueue_owner;
revoke all on function fairqueue.complete_claimed(text[], uuid[], jsonb[], text) from public,
    fairqueue_app;
grant execute on function fairqueue.complete_claimed(text[], uuid[], jsonb[],
    text) to fairqueue_app;

-- Claimed jobs whose handlers are still running (or waiting their turn in the batch) keep their
-- lease: it is set again to p_lease_s from now, tenant by tenant under each tenant's clamp, for
-- the jobs this claimer still holds. How many it extended.
create or replace function fairqueue.extend_leases(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text,
    p_lease_s double precision
) returns integer
language plpgsql set plan_cache_mode = force_generic_plan
as $$
declare
    owner record;
    extended integer;
    total integer := 0;
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
begin
    for owner in
        select c.tenant_id, array_agg(c.id) as ids
          from unnest(p_tenant_ids, p_ids) as c (tenant_id, id)
         group by c.tenant_id
    loop
        perform fairqueue.clamp(owner.tenant_id);
        update fairqueue.jobs j
           set lease_until = now() + p_lease_s * interval '1 second'
         where j.id = any(owner.ids) and j.tenant_id is not distinct from owner.tenant_id
           and j.status = running_status and j.locked_by = p_locked_by;
        get diagnostics extended = row_count;
        total := total + extended;
    end loop;
    perform fairqueue.unclamp();
    return total;
end $$;
alter function fairqueue.extend_leases(text[], uuid[], text, double precision)
    owner to fairqueue_owner;
revoke all on function fairqueue.extend_leases(text[], uuid[], text, double precision)
    from public, fairqueue_app;
grant execute on function fairqueue.extend_leases(text[], uuid[], text, double precision)
    to fairqueue_app;
