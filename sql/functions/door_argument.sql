-- The doors are the only cross-tenant steps: security definer functions the application role
-- may call, each handing back ids, tenant ids and counts, never a payload. Each door checks its
-- arguments against the bounds docs/tenancy.md gives and refuses the rest (SQLSTATE 22023, the
-- message naming the argument), then calls its body, NAME_unchecked, which only the owner may
-- call. This is the one check every door makes.
create or replace function fairqueue.door_argument(p_ok boolean, p_problem text) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    if p_ok is not true then
        raise exception using errcode = 'invalid_parameter_value', message = p_problem;
    end if;
end $$;
alter function fairqueue.door_argument(boolean, text) owner to fairqueue_owner;
revoke all on function fairqueue.door_argument(boolean, text) from public, fairqueue_app;

-- A duration a door is handed, checked and handed back as the absolute time it spans. A month
-- has no fixed length and interval comparison counts one as 30 days, so a month part could
-- pass a minimum while its sum spans less ('-12 mons 361 days' is at least '1 day' and reaches
-- back four days less than now): a month or year part is refused. The days and time that are
-- left are compared as seconds (a day is 86,400 s), and the door's body is handed that many
-- seconds, so what it uses is what was checked, whatever the session's time zone. The one check
-- of every door's durations; p_least and p_most are the door's bounds, both allowed.
create or replace function fairqueue.door_duration(p_door text, p_what text, p_value interval,
    p_least interval, p_most interval) returns interval
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    seconds double precision;
begin
    perform fairqueue.door_argument(
        p_value is not null and extract(year from p_value) = 0 and extract(month from p_value) = 0,
        format('%s: %s must be given in days, hours, minutes and seconds (no months or years),'
               ' got %s', p_door, p_what, coalesce(p_value::text, 'null')));
    seconds := extract(epoch from p_value);
    perform fairqueue.door_argument(
        seconds between extract(epoch from p_least) and extract(epoch from p_most),
        format('%s: %s must be from %s to %s, got %s (%s s)', p_door, p_what, p_least, p_most,
               p_value, seconds));
    return seconds * interval '1 second';
end $$;
alter function fairqueue.door_duration(text, text, interval, interval, interval)
    owner to fairqueue_owner;
revoke all on function fairqueue.door_duration(text, text, interval, interval, interval)
    from public, fairqueue_app;

-- The batch a door that changes claimed jobs is handed (mark_claimed_done, extend_leases): at
-- most 1,000 ids, none null, each with its tenant, and the claimer's name. The one check of it.
create or replace function fairqueue.door_claimed_batch(p_door text, p_tenant_ids text[],
    p_ids uuid[], p_locked_by text) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(
        cardinality(p_ids) <= 1000 and cardinality(p_ids) = cardinality(p_tenant_ids)
            and array_position(p_ids, null) is null,
        format('%s: ids must be at most 1000, none null, each with its tenant', p_door));
    perform fairqueue.door_argument(p_locked_by <> '' and length(p_locked_by) <= 200,
        format('%s: locked_by must be 1 to 200 characters', p_door));
end $$;
alter function fairqueue.door_claimed_batch(text, text[], uuid[], text) owner to fairqueue_owner;
revoke all on function fairqueue.door_claimed_batch(text, text[], uuid[], text)
    from public, fairqueue_app;

-- What both claim doors are handed (claim, claim_by_tenant; sql/order/claim.sql and
-- claim_by_tenant.sql): a batch of 1 to 1,000, a lease over 0 and at most a day, and the
-- claimer's name. The one check of it.
create or replace function fairqueue.door_claim_arguments(p_batch integer,
    p_lease_s double precision, p_locked_by text) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_batch between 1 and 1000,
        format('claim: batch must be from 1 to 1000, got %s', p_batch));
    perform fairqueue.door_argument(p_lease_s > 0 and p_lease_s <= 86400,
        format('claim: lease_s must be over 0 and at most 86400 (a day), got %s', p_lease_s));
    perform fairqueue.door_argument(p_locked_by <> '' and length(p_locked_by) <= 200,
        'claim: locked_by must be 1 to 200 characters');
end $$;
alter function fairqueue.door_claim_arguments(integer, double precision, text)
    owner to fairqueue_owner;
revoke all on function fairqueue.door_claim_arguments(integer, double precision, text)
    from public, fairqueue_app;

-- What the two doors that place a job in the order are handed (group_standing,
-- tenant_standing; sql/functions/job_info.sql): at most 100 standings ahead, and one priority
-- for each plan name. The one check of it.
create or replace function fairqueue.door_standing_arguments(p_door text, p_ahead integer,
    p_plan_names text[], p_plan_priorities integer[]) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_ahead between 0 and 100,
        format('%s: ahead must be from 0 to 100, got %s', p_door, p_ahead));
    perform fairqueue.door_argument(
        cardinality(p_plan_names) = cardinality(p_plan_priorities),
        format('%s: one priority per plan name', p_door));
end $$;
alter function fairqueue.door_standing_arguments(text, integer, text[], integer[])
    owner to fairqueue_owner;
revoke all on function fairqueue.door_standing_arguments(text, integer, text[], integer[])
    from public, fairqueue_app;

-- What both claims' doors are handed for the quanta (quanta_stamped, claim_by_tenant): each
-- plan's quantum beside its name and the default quantum, every one from 1 to 1000, at most 100
-- distinct names. The one check of them.
create or replace function fairqueue.door_quanta_arguments(p_plan_names text[],
    p_plan_quanta integer[], p_default_quantum integer) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_default_quantum between 1 and 1000,
        format('claim: quantum must be from 1 to 1000, got %s', p_default_quantum));
    perform fairqueue.door_argument(
        p_plan_names is not null and p_plan_quanta is not null
        and cardinality(p_plan_names) = cardinality(p_plan_quanta)
        and cardinality(p_plan_names) <= 100
        and array_position(p_plan_names, null) is null
        and cardinality(p_plan_names)
            = (select count(distinct n) from unnest(p_plan_names) n),
        'claim: plan quanta must be one quantum for each of at most 100 distinct plan names');
    perform fairqueue.door_argument(
        array_position(p_plan_quanta, null) is null
        and 1 <= all(p_plan_quanta) and 1000 >= all(p_plan_quanta),
        format('claim: every plan''s quantum must be from 1 to 1000, got %s', p_plan_quanta));
end $$;
alter function fairqueue.door_quanta_arguments(text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.door_quanta_arguments(text[], integer[], integer)
    from public, fairqueue_app;

-- The costs a door is handed for jobs it inserts (enqueue_job, enqueue_jobs, admission): each a
-- whole number of units from 1 to 1,000,000,000, so that a day's served count (bigint) cannot
-- overflow. The one check of a cost; the jobs table's constraint says the same of any row.
create or replace function fairqueue.door_costs(p_door text, p_costs integer[]) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    bad record;
begin
    -- One read of the costs; the message is made only for a cost refused.
    select c.cost into bad
      from unnest(p_costs) as c (cost)
     where c.cost is null or c.cost not between 1 and 1000000000
     limit 1;
    if found then
        perform fairqueue.door_argument(false,
            format('%s: cost must be a whole number from 1 to 1000000000, got %s', p_door,
                   coalesce(bad.cost::text, 'null')));
    end if;
end $$;
alter function fairqueue.door_costs(text, integer[]) owner to fairqueue_owner;
revoke all on function fairqueue.door_costs(text, integer[]) from public, fairqueue_app;

-- What the claims' doors and the doorbell's claim are handed for the caps per tenant
-- (Plan(max_running=n)): each plan's cap beside its name and the cap of a tenant whose plan is
-- not named, each from 0 to 1,000,000, 0 or null meaning none. The one check of them.
create or replace function fairqueue.door_caps_arguments(p_door text, p_plan_names text[],
    p_plan_caps integer[], p_default_cap integer) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(
        p_plan_names is not null and p_plan_caps is not null
        and cardinality(p_plan_names) = cardinality(p_plan_caps),
        format('%s: plan caps must be one cap for each plan name', p_door));
    perform fairqueue.door_argument(
        coalesce(0 <= all(p_plan_caps) and 1000000 >= all(p_plan_caps), true)
        and coalesce(p_default_cap between 0 and 1000000, true),
        format('%s: every cap must be from 0 (none) to 1000000, got %s and default %s', p_door,
               p_plan_caps, p_default_cap));
end $$;
alter function fairqueue.door_caps_arguments(text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.door_caps_arguments(text, text[], integer[], integer)
    from public, fairqueue_app;
