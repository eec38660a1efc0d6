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

-- Claimed jobs that finished with no output marked done by one statement for the whole batch,
-- whichever tenants they are of: a completion that writes no output changes the row's state as
-- the claim does (status, finish time, lease), none of the job's data, so it crosses tenants as
-- the claim does. Each row is still named with its tenant and its claimer. A caller whose
-- transaction is clamped finishes only jobs inside its clamp, as the policies would let it. The
-- ids that were still this claimer's.
--
-- A job done with no output owes nothing more (no result to save, no give-up hook), so it leaves
-- the hot table in the same statement: deleted from fairqueue.jobs and written done into today's
-- day of finished_jobs (keep_finished), two row versions in the hot table for its life instead
-- of three. Only when today's day has not been made yet is it marked done where it is, for the
-- backstop's move to take later.
create or replace function fairqueue.mark_claimed_done_unchecked(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text
) returns table (
    id uuid)
language plpgsql set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
declare
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
    unclamped constant boolean := fairqueue.clamped_to_no_one();
begin
    if fairqueue.finishing_day_made() then
        return query
            with gone as (
                delete from fairqueue.jobs j
                 using unnest(p_tenant_ids, p_ids) as o (tenant_id, id)
                 where j.id = o.id and j.tenant_id is not distinct from o.tenant_id
                   and (unclamped or fairqueue.within_clamp(o.tenant_id))
                   and j.status = running_status and j.locked_by = p_locked_by
                returning j
            )
            select k.id from fairqueue.keep_finished((select array_agg(g.j) from gone g), true) k;
        return;
    end if;
    return query
        update fairqueue.jobs j
           set status = 'done', finished_at = now(), lease_until = null, last_error = null,
               output = null
          from unnest(p_tenant_ids, p_ids) as o (tenant_id, id)
         where j.id = o.id and j.tenant_id is not distinct from o.tenant_id
           and (unclamped or fairqueue.within_clamp(o.tenant_id))
           and j.status = running_status and j.locked_by = p_locked_by
        returning j.id;
end $$;
alter function fairqueue.mark_claimed_done_unchecked(text[], uuid[], text)
    owner to fairqueue_owner;
revoke all on function fairqueue.mark_claimed_done_unchecked(text[], uuid[], text)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs mark_claimed_done_unchecked as the owner.
create or replace function fairqueue.mark_claimed_done(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text
) returns table (
    id uuid)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_claimed_batch('mark_claimed_done', p_tenant_ids, p_ids, p_locked_by);
select * from fairqueue.mark_claimed_done_unchecked(p_tenant_ids, p_ids, p_locked_by);
$$;
alter function fairqueue.mark_claimed_done(text[], uuid[], text) owner to fairqueue_owner;
revoke all on function fairqueue.mark_claimed_done(text[], uuid[], text)
    from public, fairqueue_app;
grant execute on function fairqueue.mark_claimed_done(text[], uuid[], text) to fairqueue_app;

-- Claimed jobs marked done with their outputs: the ids that were still this claimer's. Those
-- with no output by mark_claimed_done, in one statement; those with one tenant by tenant under
-- each tenant's clamp, since an output is the job's data. A door run as the owner, since the
-- application role changes no job row itself (sql/policies/jobs.sql); a caller whose
-- transaction is clamped finishes only jobs inside its clamp, as mark_claimed_done does.
create or replace function fairqueue.complete_claimed(
    p_tenant_ids text[],
    p_ids uuid[],
    p_outputs jsonb[],
    p_locked_by text
) returns table (
    id uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
declare
    owner record;
    plain_tenants text[];
    plain_ids uuid[];
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
    unclamped constant boolean := fairqueue.clamped_to_no_one();
begin
    perform fairqueue.door_claimed_batch('complete_claimed', p_tenant_ids, p_ids, p_locked_by);
    perform fairqueue.door_argument(cardinality(p_outputs) = cardinality(p_ids),
        'complete_claimed: one output (or null) for each id');
    select array_agg(c.tenant_id) filter (where c.output is null),
           array_agg(c.id) filter (where c.output is null)
      into plain_tenants, plain_ids
      from unnest(p_tenant_ids, p_ids, p_outputs) as c (tenant_id, id, output);
    if plain_ids is not null then
        return query select d.id
                       from fairqueue.mark_claimed_done(plain_tenants, plain_ids, p_locked_by) d;
    end if;
    for owner in
        select c.tenant_id, array_agg(c.id) as ids, array_agg(c.output) as outputs
          from unnest(p_tenant_ids, p_ids, p_outputs) as c (tenant_id, id, output)
         where c.output is not null
           and (unclamped or fairqueue.within_clamp(c.tenant_id))
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
-- lease: it is set again to p_lease_s from now for the jobs this claimer still holds, by one
-- statement for the whole batch, whichever tenants they are of. A lease is the claim's state,
-- not the job's data, so it crosses tenants as the claim and a completion with no output do,
-- each row still named with its tenant and its claimer; a caller whose transaction is clamped
-- keeps only the jobs inside its clamp. How many it extended.
create or replace function fairqueue.extend_leases_unchecked(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text,
    p_lease_s double precision
) returns integer
language plpgsql set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
declare
    -- A variable, not a literal: in the generic plan no partial index over a status can be
    -- proven to match, so the ids are looked up by primary key whatever the statistics say.
    running_status constant text := 'running';
    unclamped constant boolean := fairqueue.clamped_to_no_one();
    extended integer;
begin
    update fairqueue.jobs j
       set lease_until = now() + p_lease_s * interval '1 second'
      from unnest(p_tenant_ids, p_ids) as o (tenant_id, id)
     where j.id = o.id and j.tenant_id is not distinct from o.tenant_id
       and (unclamped or fairqueue.within_clamp(o.tenant_id))
       and j.status = running_status and j.locked_by = p_locked_by;
    get diagnostics extended = row_count;
    return extended;
end $$;
alter function fairqueue.extend_leases_unchecked(text[], uuid[], text, double precision)
    owner to fairqueue_owner;
revoke all on function fairqueue.extend_leases_unchecked(text[], uuid[], text, double precision)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs extend_leases_unchecked as the owner.
create or replace function fairqueue.extend_leases(
    p_tenant_ids text[],
    p_ids uuid[],
    p_locked_by text,
    p_lease_s double precision
) returns integer
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_claimed_batch('extend_leases', p_tenant_ids, p_ids, p_locked_by);
select fairqueue.door_argument(p_lease_s > 0 and p_lease_s <= 86400,
    format('extend_leases: lease_s must be over 0 and at most 86400 (a day), got %s', p_lease_s));
select fairqueue.extend_leases_unchecked(p_tenant_ids, p_ids, p_locked_by, p_lease_s);
$$;
alter function fairqueue.extend_leases(text[], uuid[], text, double precision)
    owner to fairqueue_owner;
revoke all on function fairqueue.extend_leases(text[], uuid[], text, double precision)
    from public, fairqueue_app;
grant execute on function fairqueue.extend_leases(text[], uuid[], text, double precision)
    to fairqueue_app;

-- What claimed jobs spent (quota units, through job.spend) becomes the units they count as served
-- (`counted`), for the jobs this claimer still holds: a stage fair by cost settles its jobs so
-- before their completion, and the triggers on jobs move each group's count by the difference
-- (spent - what the claim counted). Spent units past a job's largest cost count as that cost, so
-- that a day's count cannot overflow. A job that spent nothing keeps its cost. A caller whose
-- transaction is clamped settles only jobs inside its clamp. How many it settled.
create or replace function fairqueue.settle_spent(
    p_tenant_ids text[],
    p_ids uuid[],
    p_units bigint[],
    p_locked_by text
) returns bigint
language plpgsql security definer set search_path = pg_catalog, pg_temp
    set plan_cache_mode = force_generic_plan
as $$
declare
    -- A variable, not a literal: see mark_claimed_done_unchecked.
    running_status constant text := 'running';
    unclamped constant boolean := fairqueue.clamped_to_no_one();
    settled bigint;
begin
    perform fairqueue.door_claimed_batch('settle_spent', p_tenant_ids, p_ids, p_locked_by);
    perform fairqueue.door_argument(
        cardinality(p_units) = cardinality(p_ids) and array_position(p_units, null) is null
            and coalesce((select min(u) >= 1 from unnest(p_units) u), true),
        'settle_spent: one spent count of at least 1 for each id');
    with changed as (
        update fairqueue.jobs j
           set counted = least(o.units, 1000000000)
          from unnest(p_tenant_ids, p_ids, p_units) as o (tenant_id, id, units)
         where j.id = o.id and j.tenant_id is not distinct from o.tenant_id
           and (unclamped or fairqueue.within_clamp(o.tenant_id))
           and j.status = running_status and j.locked_by = p_locked_by
           and j.counted <> least(o.units, 1000000000)
        returning 1
    )
    select count(*) into settled from changed;
    return settled;
end $$;
alter function fairqueue.settle_spent(text[], uuid[], bigint[], text) owner to fairqueue_owner;
revoke all on function fairqueue.settle_spent(text[], uuid[], bigint[], text)
    from public, fairqueue_app;
grant execute on function fairqueue.settle_spent(text[], uuid[], bigint[], text)
    to fairqueue_app;
