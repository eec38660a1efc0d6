-- Caps per tenant (Plan(max_running=n)): a tenant on a capped plan has at most n jobs of one type
-- running at once, across every claimer. The claims (claim_firsts, claim_picks, the tenant
-- claim) and the doorbell's claim (sql/functions/doorbells.sql) ask tenant_rooms how many more
-- each capped tenant they meet may take, and take no more.

-- A plan's cap: the cap p_plan_caps gives it beside its name in p_plan_names, or p_default_cap
-- for a plan not named there (a tenant with no plan, or one the caller does not know); 0 or
-- null for none. Jobs with no tenant (tenant key '') have none. The one spelling of that rule.
create or replace function fairqueue.plan_cap(
    p_tenant_key text,
    p_plan text,
    p_plan_names text[],
    p_plan_caps integer[],
    p_default_cap integer
) returns integer
language sql immutable parallel safe
as $$
select case when p_tenant_key operator(pg_catalog.=) '' then 0
            else coalesce(nullif(coalesce(
                     p_plan_caps[pg_catalog.array_position(p_plan_names, p_plan)],
                     p_default_cap), 0), 0) end
$$;

alter function fairqueue.plan_cap(text, text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.plan_cap(text, text, text[], integer[], integer)
    from public, fairqueue_app;

-- Whether any plan has a cap: a claim with none does nothing of this file's.
create or replace function fairqueue.any_cap(p_plan_caps integer[], p_default_cap integer)
returns boolean
language sql immutable parallel safe
as $$
select coalesce(p_default_cap, 0) operator(pg_catalog.>) 0
       or coalesce(0 operator(pg_catalog.<) any(p_plan_caps), false)
$$;

alter function fairqueue.any_cap(integer[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.any_cap(integer[], integer) from public, fairqueue_app;

-- How many more jobs of its type each capped (type, tenant) of the arguments may have running
-- now: its cap less its running jobs of the type (through jobs_lease_idx: a running job holds a
-- lease), or 0 when another transaction is claiming for it. Uncapped ones are left out. The first statement takes a
-- transaction lock per (type, tenant) (advisory, two-key form, class 'FQCA'; the lanes' and
-- credits' classes are 'FQLN' and 'FQCR', fairqueue/lanes.py), so two claimers never both fill
-- one tenant's room; without p_wait a tenant another holds is passed over (room 0), with it the
-- lock is waited for, in key order, at most 100 ms. The count is a second statement, so that its
-- snapshot is taken after the lock: it sees every claim for the tenant that committed before. A
-- lock this transaction holds already is taken again at once, so a claim may ask again for the
-- same tenants (its count then sees no claim but its own, which it has not made yet).
create or replace function fairqueue.tenant_rooms(
    p_types text[],
    p_tenant_keys text[],
    p_plans text[],
    p_plan_names text[],
    p_plan_caps integer[],
    p_default_cap integer,
    p_wait boolean
) returns table (type text, tenant_key text, room integer)
language plpgsql set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    types text[];
    keys text[];
    caps integer[];
    held boolean[];
    timeout text;
    -- How long a claim that holds no standing waits for a capped tenant another is claiming for.
    wait_ms constant integer := 100;
begin
    select array_agg(c.type order by c.type, c.tenant_key),
           array_agg(c.tenant_key order by c.type, c.tenant_key),
           array_agg(c.cap order by c.type, c.tenant_key)
      into types, keys, caps
      from (select distinct u.type, u.tenant_key,
                   fairqueue.plan_cap(u.tenant_key, u.plan, p_plan_names, p_plan_caps,
                                      p_default_cap) as cap
              from unnest(p_types, p_tenant_keys, p_plans) as u (type, tenant_key, plan)) c
     where c.cap > 0;
    if types is null then
        return;
    end if;
    -- One lock after another, in key order. A wait is bounded (wait_ms): two claimers waiting,
    -- each holding a tenant the other meets later, would deadlock, and a claim holds a tenant's
    -- lock only for its own moment; past the bound the tenant is passed over.
    held := array_fill(false, array[cardinality(keys)]);
    timeout := current_setting('lock_timeout');
    for i in 1 .. cardinality(keys) loop
        if not p_wait then
            held[i] := pg_try_advisory_xact_lock(1179730753, hashtext(types[i] || '/' || keys[i]));
            continue;
        end if;
        begin
            perform set_config('lock_timeout', wait_ms || 'ms', true);
            perform pg_advisory_xact_lock(1179730753, hashtext(types[i] || '/' || keys[i]));
            held[i] := true;
        exception when lock_not_available then
            held[i] := false;
        end;
        perform set_config('lock_timeout', timeout, true);
    end loop;
    return query
    select u.type, u.key,
           case when not u.held then 0
                else greatest(0, u.cap - (select count(*)
                                            from fairqueue.jobs j
                                           where j.type = u.type and j.status = 'running'
                                             and j.lease_until is not null
                                             and j.tenant_id
                                                 = regexp_replace(u.key, '\\(.)', '\1', 'g'))
                             )::integer end
      from unnest(types, keys, caps, held) as u (type, key, cap, held);
end $$;

alter function fairqueue.tenant_rooms(text[], text[], text[], text[], integer[], integer, boolean)
    owner to fairqueue_owner;
revoke all on function fairqueue.tenant_rooms(text[], text[], text[], text[], integer[], integer,
    boolean) from public, fairqueue_app;
