-- A batch's reads and completions: one statement per batch, still one tenant's clamp per row.
--
-- The pipeline read its claimed jobs and marked them done with two statements per tenant of the
-- batch (set the clamp, then read or update). A fair batch spans many tenants (about 80 of 100
-- jobs in the benchmark), so a batch cost over 300 statements. The functions below run the same
-- per-tenant statements inside the server: they are SECURITY INVOKER, so row-level security
-- applies to each statement exactly as before, under the clamp of the tenant it works for.
-- Their statements keep one generic plan (a primary-key lookup): left to choose, PL/pgSQL
-- planned each tenant's statement afresh, which cost more than running it.

-- The clamp itself, in one place: Python's tenancy module and the batch functions both call it.
-- NULL is the system clamp (jobs with no tenant); the settings die with the transaction.
-- PL/pgSQL rather than SQL: a SQL function called from PL/pgSQL is planned again at every call.
create function fairqueue.clamp(p_tenant_id text) returns void
language plpgsql volatile as $$
begin
    perform set_config('fairqueue.tenant_id', coalesce(p_tenant_id, ''), true),
            set_config('fairqueue.system', case when p_tenant_id is null then 'on' else '' end,
                       true);
end
$$;

-- No tenant at all: what a transaction sees after working through a batch's tenants.
create function fairqueue.unclamp() returns void
language plpgsql volatile as $$
begin
    perform set_config('fairqueue.tenant_id', '', true), set_config('fairqueue.system', '', true);
end
$$;

-- The served counter's triggers run once per statement; the batch functions above make one
-- statement per tenant, and the SQL helper the triggers call was planned again each time.
create or replace function fairqueue.served_near_edge(oldest timestamptz) returns void
language plpgsql as $$
begin
    if oldest < now() - interval '23 hours' then
        perform fairqueue.served_edge_lock();
    end if;
end
$$;

-- Claimed jobs, read tenant by tenant under each tenant's clamp: those this claimer still holds.
create function fairqueue.read_claimed(p_tenant_ids text[], p_ids uuid[], p_locked_by text)
returns table (id uuid, type text, payload jsonb, tenant_id text, group_id text, attempts integer,
               max_attempts integer, lane text, delta_of uuid, upstream_id text, released boolean,
               release_tries integer)
language plpgsql volatile set plan_cache_mode = force_generic_plan as $$
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
             where j.id = any(owner.ids) and j.status = running_status and j.locked_by = p_locked_by;
    end loop;
    perform fairqueue.unclamp();
end
$$;

-- Claimed jobs marked done with their outputs, tenant by tenant under each tenant's clamp: the
-- ids that were still this claimer's.
create function fairqueue.complete_claimed(p_tenant_ids text[], p_ids uuid[], p_outputs jsonb[],
                                           p_locked_by text)
returns table (id uuid)
language plpgsql volatile set plan_cache_mode = force_generic_plan as $$
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
             where j.id = o.id and j.status = running_status and j.locked_by = p_locked_by
            returning j.id;
    end loop;
    perform fairqueue.unclamp();
end
$$;

-- The lease index held `status = 'running'` rows; a read by id that also says
-- `status = 'running'` matched its predicate, and with few running rows in the statistics the
-- planner scanned the whole index (every running row, and the dead entries of every claim
-- since the last vacuum) instead of looking the ids up. The same rows, under a predicate that no
-- status test implies: only the lease searches use it.
drop index fairqueue.jobs_lease_idx;
create index jobs_lease_idx on fairqueue.jobs (type, lease_until) where lease_until is not null;

alter function fairqueue.clamp(text) owner to fairqueue_owner;
alter function fairqueue.unclamp() owner to fairqueue_owner;
alter function fairqueue.read_claimed(text[], uuid[], text) owner to fairqueue_owner;
alter function fairqueue.complete_claimed(text[], uuid[], jsonb[], text) owner to fairqueue_owner;
revoke execute on function
    fairqueue.clamp(text),
    fairqueue.unclamp(),
    fairqueue.read_claimed(text[], uuid[], text),
    fairqueue.complete_claimed(text[], uuid[], jsonb[], text)
    from public;
grant execute on function
    fairqueue.clamp(text),
    fairqueue.unclamp(),
    fairqueue.read_claimed(text[], uuid[], text),
    fairqueue.complete_claimed(text[], uuid[], jsonb[], text)
    to fairqueue_app;
