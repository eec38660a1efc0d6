-- The clamp: the tenant this transaction works for. An unset or empty setting matches nothing,
-- for text and uuid columns alike (nullif before the cast, so '' never reaches ::uuid).
create or replace function fairqueue.current_tenant() returns text
language sql stable
as $$
 select nullif(current_setting('fairqueue.tenant_id', true), '')
$$;

alter function fairqueue.current_tenant() owner to fairqueue_owner;
revoke all on function fairqueue.current_tenant() from public, fairqueue_app;
grant execute on function fairqueue.current_tenant() to fairqueue_app;

-- System jobs (no tenant) are visible only to a transaction that asked for them.
create or replace function fairqueue.system_clamp() returns boolean
language sql stable
as $$
 select coalesce(current_setting('fairqueue.system', true), '') = 'on'
$$;

alter function fairqueue.system_clamp() owner to fairqueue_owner;
revoke all on function fairqueue.system_clamp() from public, fairqueue_app;
grant execute on function fairqueue.system_clamp() to fairqueue_app;

-- Whether a row with this tenant is inside the transaction's clamp: the one predicate of every
-- fairqueue table's policy (inlined by the planner: a plain SQL expression).
create or replace function fairqueue.within_clamp(p_tenant_id text) returns boolean
language sql stable
as $$
    select p_tenant_id = fairqueue.current_tenant()
        or (p_tenant_id is null and fairqueue.system_clamp())
$$;

alter function fairqueue.within_clamp(text) owner to fairqueue_owner;
revoke all on function fairqueue.within_clamp(text) from public, fairqueue_app;
grant execute on function fairqueue.within_clamp(text) to fairqueue_app;

-- The clamp itself, in one place: Python's tenancy module and the batch functions both call it.
-- NULL is the system clamp (jobs with no tenant); the settings die with the transaction.
-- PL/pgSQL rather than SQL: a SQL function called from PL/pgSQL is planned again at every call.
create or replace function fairqueue.clamp(p_tenant_id text) returns void
language plpgsql
as $$
begin
    perform set_config('fairqueue.tenant_id', coalesce(p_tenant_id, ''), true),
            set_config('fairqueue.system', case when p_tenant_id is null then 'on' else '' end,
                       true);
end $$;
alter function fairqueue.clamp(text) owner to fairqueue_owner;
revoke all on function fairqueue.clamp(text) from public, fairqueue_app;
grant execute on function fairqueue.clamp(text) to fairqueue_app;

-- No tenant at all: what a transaction sees after working through a batch's tenants.
create or replace function fairqueue.unclamp() returns void
language plpgsql
as $$
begin
    perform set_config('fairqueue.tenant_id', '', true), set_config('fairqueue.system', '', true);
end $$;
alter function fairqueue.unclamp() owner to fairqueue_owner;
revoke all on function fairqueue.unclamp() from public, fairqueue_app;
grant execute on function fairqueue.unclamp() to fairqueue_app;

-- Whether the transaction is clamped to no one: no tenant and not the system clamp.
create or replace function fairqueue.clamped_to_no_one() returns boolean
language sql stable
as $$
 select fairqueue.current_tenant() is null and not fairqueue.system_clamp()
$$;

alter function fairqueue.clamped_to_no_one() owner to fairqueue_owner;
revoke all on function fairqueue.clamped_to_no_one() from public, fairqueue_app;
grant execute on function fairqueue.clamped_to_no_one() to fairqueue_app;

-- Clamps the transaction to the tenant unless it is clamped already, then says what it is
-- clamped to (NULL and true: the system clamp) and whether that clamp is the tenant's own:
-- a statement that starts with it works for the tenant from its first row, in a transaction of
-- its own or in the caller's, and goes on only where `matches`. One row, as the planner is
-- told: the default guess of a thousand made a statement joining it to its items big enough
-- to compile.
create or replace function fairqueue.clamp_unless_clamped(p_tenant_id text)
returns table (tenant_id text, system boolean, matches boolean)
language plpgsql rows 1
as $$
begin
    if fairqueue.clamped_to_no_one() then
        perform fairqueue.clamp(p_tenant_id);
    end if;
    tenant_id := fairqueue.current_tenant();
    system := fairqueue.system_clamp();
    -- The policies' own predicate: a row of this tenant would be let in.
    matches := coalesce(fairqueue.within_clamp(p_tenant_id), false);
    return next;
end $$;
alter function fairqueue.clamp_unless_clamped(text) owner to fairqueue_owner;
revoke all on function fairqueue.clamp_unless_clamped(text) from public, fairqueue_app;
grant execute on function fairqueue.clamp_unless_clamped(text) to fairqueue_app;
