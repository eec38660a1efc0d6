-- Enqueue (fairqueue.jobs.enqueue and fairqueue.bulk.enqueue_many): the clamp and the insert in
-- one call, one round trip, on an autocommit connection its own transaction. Each clamps its
-- transaction to the tenant unless it is clamped already (clamped_to, system and matches say
-- what the clamp is) and inserts only under the tenant's own clamp. They run as the caller (not
-- doors): row-level security holds the caller's clamp, and the insert names the tenant. PL/pgSQL,
-- so that the connection plans each statement once and keeps the plan, with no prepared statement
-- a transaction pooler could trip on: planning the same statement sent bare was a quarter of a
-- single enqueue's time (docs/design.md, "Enqueue in batches").

-- One job: id is NULL when the clamp is another tenant's, or when an open job of the tenant holds
-- the dedupe key.
create or replace function fairqueue.enqueue_job(
    p_type text, p_tenant_id text, p_payload jsonb, p_group_id text, p_dedupe_key text,
    p_max_attempts integer, p_run_after timestamp with time zone, p_delay_s float8)
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if matches then
        insert into fairqueue.jobs
               (type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after)
        values (p_type, p_payload, p_tenant_id, p_group_id, p_dedupe_key, p_max_attempts,
                coalesce(p_run_after, now() + p_delay_s * interval '1 second'))
        on conflict (coalesce(tenant_id, ''), dedupe_key)
           where dedupe_key is not null and status in ('queued', 'pending', 'running')
           do nothing
        returning fairqueue.jobs.id into id;
    end if;
    return next;
end $$;
alter function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8) owner to fairqueue_owner;
revoke all on function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8) from public, fairqueue_app;
grant execute on function fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8) to fairqueue_app;

-- The jobs of one enqueue_many call (one type, one tenant), item k at array position k, one row
-- per item in that order. Each item's id is drawn before the insert so that every item is
-- matched to its row: an item whose dedupe key an open job of the tenant holds comes back with a
-- NULL id, as enqueue_job's does. Rows go in by dedupe key, so two calls that share keys wait for
-- each other in one order and never deadlock, whatever order their callers gave. When the clamp
-- is another tenant's, every row says so and nothing is inserted.
create or replace function fairqueue.enqueue_jobs(
    p_type text, p_tenant_id text, p_payloads text[], p_group_ids text[], p_dedupe_keys text[],
    p_max_attempts integer[], p_run_afters timestamp with time zone[], p_delays_s float8[])
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
begin
    return query
    with clamp as materialized (
        select c.tenant_id, c.system, c.matches
          from fairqueue.clamp_unless_clamped(p_tenant_id) c
    ),
    item as materialized (
        select fairqueue.new_job_id() as id, i.n, i.payload, i.group_id, i.dedupe_key,
               i.max_attempts, i.run_after, i.delay_s
          from unnest(p_payloads, p_group_ids, p_dedupe_keys, p_max_attempts, p_run_afters,
                      p_delays_s)
               with ordinality
               as i (payload, group_id, dedupe_key, max_attempts, run_after, delay_s, n)
    ),
    inserted as (
        insert into fairqueue.jobs
               (id, type, payload, tenant_id, group_id, dedupe_key, max_attempts, run_after)
        select item.id, p_type, item.payload::jsonb, p_tenant_id, item.group_id,
               item.dedupe_key, item.max_attempts,
               coalesce(item.run_after, now() + item.delay_s * interval '1 second')
          from item, clamp
         where clamp.matches
         order by item.dedupe_key, item.n
        on conflict (coalesce(tenant_id, ''), dedupe_key)
           where dedupe_key is not null and status in ('queued', 'pending', 'running')
           do nothing
        returning fairqueue.jobs.id
    )
    select clamp.tenant_id, clamp.system, clamp.matches, inserted.id
      from clamp
     cross join item
      left join inserted on inserted.id = item.id
     order by item.n;
end $$;
alter function fairqueue.enqueue_jobs(text, text, text[], text[], text[], integer[],
    timestamp with time zone[], float8[]) owner to fairqueue_owner;
revoke all on function fairqueue.enqueue_jobs(text, text, text[], text[], text[], integer[],
    timestamp with time zone[], float8[]) from public, fairqueue_app;
grant execute on function fairqueue.enqueue_jobs(text, text, text[], text[], text[], integer[],
    timestamp with time zone[], float8[]) to fairqueue_app;
