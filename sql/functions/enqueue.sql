-- Enqueue (fairqueue.jobs.enqueue and fairqueue.bulk.enqueue_many): the clamp and the insert in
-- one call, one round trip, on an autocommit connection its own transaction. Each clamps its
-- transaction to the tenant unless it is clamped already (clamped_to, system and matches say
-- what the clamp is) and inserts only under the tenant's own clamp (`matches`). They are doors,
-- run as the owner: the application role inserts no job itself (sql/policies/jobs.sql), so a
-- new job's status, times and attempts are the table's defaults, never the caller's. PL/pgSQL,
-- so that the connection plans each statement once and keeps the plan, with no prepared statement
-- a transaction pooler could trip on: planning the same statement sent bare was a quarter of a
-- single enqueue's time (docs/design/admission.md, "Enqueue in batches").

-- One job: id is NULL when the clamp is another tenant's, or when an open job of the tenant holds
-- the dedupe key. p_cost is the job's cost in units (Stage(fair_by="cost")), checked here.
create or replace function fairqueue.enqueue_job(
    p_type text, p_tenant_id text, p_payload jsonb, p_group_id text, p_dedupe_key text,
    p_max_attempts integer, p_run_after timestamp with time zone, p_delay_s float8,
    p_cost integer default 1)
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    -- The default cost needs no check: a call per enqueue was 6 % of one.
    if p_cost is distinct from 1 then
        perform fairqueue.door_costs('enqueue_job', array[p_cost]);
    end if;
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if matches then
        insert into fairqueue.jobs
               (type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after, cost)
        values (p_type, p_payload, p_tenant_id, p_group_id, p_dedupe_key, p_max_attempts,
                coalesce(p_run_after, now() + p_delay_s * interval '1 second'), p_cost)
        on conflict (coalesce(tenant_id, ''), dedupe_key)
           where dedupe_key is not null and status in ('queued', 'pending', 'running')
           do nothing
        returning fairqueue.jobs.id into id;
    end if;
    return next;
end $$;
alter function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8, integer) owner to fairqueue_owner;
revoke all on function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8, integer) from public, fairqueue_app;
grant execute on function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8, integer) to fairqueue_app;

-- The jobs of one enqueue_many call (one type, one tenant), item k at position k of the arrays and
-- of p_payloads, a JSON array of the payloads (one document for the call: the client encodes it
-- once rather than a thousand times). One row whose ids hold item k's id at position k, NULL
-- where an open job of the tenant holds the item's dedupe key (as enqueue_job's id is). The ids
-- are drawn before the insert so that each item is matched to its row. Without dedupe keys,
-- which no conflict can refuse, the rows go in as they come; with them, by dedupe key, so that
-- two calls that share keys wait for each other in one order and never deadlock, whatever order
-- their callers gave. When the clamp is another tenant's, the row says so, ids is NULL and
-- nothing is inserted. One row of an array rather than a row per item: matching a thousand rows
-- back to their items, and sending them, was a sixth of the call (docs/design/admission.md, "Enqueue in
-- batches"). A NULL group id, dedupe key or run_after array stands for a null at every position
-- (ROWS FROM pads a set that ends early with nulls), so a caller sends no array of nulls. A
-- NULL p_costs gives every job a cost of 1.
create or replace function fairqueue.enqueue_jobs(
    p_type text, p_tenant_id text, p_payloads jsonb, p_group_ids text[], p_dedupe_keys text[],
    p_max_attempts integer[], p_run_afters timestamp with time zone[], p_delays_s float8[],
    p_costs integer[] default null)
returns table (clamped_to text, system boolean, matches boolean, ids uuid[])
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    drawn uuid[];
begin
    if p_costs is not null then
        perform fairqueue.door_costs('enqueue_jobs', p_costs);
        perform fairqueue.door_argument(cardinality(p_costs) = jsonb_array_length(p_payloads),
            'enqueue_jobs: one cost for each payload');
    end if;
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if not matches then
        return next;
        return;
    end if;
    drawn := array(select fairqueue.new_job_id()
                     from generate_series(1, jsonb_array_length(p_payloads)));
    if coalesce(cardinality(array_remove(p_dedupe_keys, null)), 0) = 0 then
        insert into fairqueue.jobs
               (id, type, payload, tenant_id, group_id, max_attempts, run_after, cost)
        select i.id, p_type, i.payload, p_tenant_id, i.group_id, i.max_attempts,
               coalesce(i.run_after, now() + i.delay_s * interval '1 second'),
               coalesce(i.cost, 1)
          from rows from (unnest(drawn), jsonb_array_elements(p_payloads), unnest(p_group_ids),
                          unnest(p_max_attempts), unnest(p_run_afters), unnest(p_delays_s),
                          unnest(p_costs))
               as i (id, payload, group_id, max_attempts, run_after, delay_s, cost);
        ids := drawn;
    else
        with inserted as (
            insert into fairqueue.jobs
                   (id, type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after,
                    cost)
            select i.id, p_type, i.payload, p_tenant_id, i.group_id, i.dedupe_key,
                   i.max_attempts, coalesce(i.run_after, now() + i.delay_s * interval '1 second'),
                   coalesce(i.cost, 1)
              from rows from (unnest(drawn), jsonb_array_elements(p_payloads),
                              unnest(p_group_ids), unnest(p_dedupe_keys),
                              unnest(p_max_attempts), unnest(p_run_afters),
                              unnest(p_delays_s), unnest(p_costs)) with ordinality
                   as i (id, payload, group_id, dedupe_key, max_attempts, run_after, delay_s,
                         cost, n)
             order by i.dedupe_key, i.n
            on conflict (coalesce(tenant_id, ''), dedupe_key)
               where dedupe_key is not null and status in ('queued', 'pending', 'running')
               do nothing
            returning fairqueue.jobs.id
        )
        select array_agg(inserted.id order by d.n) into ids
          from unnest(drawn) with ordinality as d (id, n)
          left join inserted on inserted.id = d.id;
    end if;
    return next;
end $$;
alter function fairqueue.enqueue_jobs(text, text, jsonb, text[], text[], integer[],
    timestamp with time zone[], float8[], integer[]) owner to fairqueue_owner;
revoke all on function fairqueue.enqueue_jobs(text, text, jsonb, text[], text[], integer[],
    timestamp with time zone[], float8[], integer[]) from public, fairqueue_app;
grant execute on function fairqueue.enqueue_jobs(text, text, jsonb, text[], text[], integer[],
    timestamp with time zone[], float8[], integer[]) to fairqueue_app;
