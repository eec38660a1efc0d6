-- The doors and the tables behind them take only what the library needs.
--
-- The served counts decide the fair order, so only the owner's triggers write them: the
-- application role keeps reading them and loses every write. The triggers run as the owner,
-- whoever changed jobs.
alter function fairqueue.jobs_served_insert() security definer set search_path = pg_catalog, pg_temp;
alter function fairqueue.jobs_served_update() security definer set search_path = pg_catalog, pg_temp;
alter function fairqueue.jobs_served_delete() security definer set search_path = pg_catalog, pg_temp;
revoke insert, update, delete, truncate on fairqueue.served from fairqueue_app;
revoke insert, update, delete, truncate on fairqueue.served_watermark from fairqueue_app;

-- Each door checks its arguments against the bounds docs/tenancy.md gives, and refuses the rest
-- (SQLSTATE 22023, the message naming the argument): a claim of a million jobs leased for
-- thirty years, or a retention window that reaches into the future, is refused whoever asks.
-- The bodies stay where they are, renamed *_unchecked: no longer security definer and callable
-- by the owner alone, they run as the owner only when a checked door in front of them calls.
create function fairqueue.door_argument(p_ok boolean, p_problem text) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    if p_ok is not true then
        raise exception using errcode = 'invalid_parameter_value', message = p_problem;
    end if;
end $$;
alter function fairqueue.door_argument(boolean, text) owner to fairqueue_owner;
revoke execute on function fairqueue.door_argument(boolean, text) from public;

alter function fairqueue.claim(text, integer, integer, double precision, text, uuid, text[],
    integer[], integer) rename to claim_unchecked;
alter function fairqueue.trim_outputs(interval, integer) rename to trim_outputs_unchecked;
alter function fairqueue.prune_jobs(interval, integer) rename to prune_jobs_unchecked;
alter function fairqueue.claim_missing_results(text[], interval, integer)
    rename to claim_missing_results_unchecked;
alter function fairqueue.due_result_hooks(text[], interval, integer)
    rename to due_result_hooks_unchecked;
alter function fairqueue.fail_abandoned(text[], integer) rename to fail_abandoned_unchecked;
alter function fairqueue.stale_doorbells(text[], interval, integer)
    rename to stale_doorbells_unchecked;
alter function fairqueue.stalled_lanes(integer) rename to stalled_lanes_unchecked;
alter function
    fairqueue.claim_unchecked(text, integer, integer, double precision, text, uuid, text[],
        integer[], integer) security invoker;
alter function fairqueue.trim_outputs_unchecked(interval, integer) security invoker;
alter function fairqueue.prune_jobs_unchecked(interval, integer) security invoker;
alter function fairqueue.claim_missing_results_unchecked(text[], interval, integer)
    security invoker;
alter function fairqueue.due_result_hooks_unchecked(text[], interval, integer) security invoker;
alter function fairqueue.fail_abandoned_unchecked(text[], integer) security invoker;
alter function fairqueue.stale_doorbells_unchecked(text[], interval, integer) security invoker;
alter function fairqueue.stalled_lanes_unchecked(integer) security invoker;
revoke execute on function
    fairqueue.claim_unchecked(text, integer, integer, double precision, text, uuid, text[],
        integer[], integer),
    fairqueue.trim_outputs_unchecked(interval, integer),
    fairqueue.prune_jobs_unchecked(interval, integer),
    fairqueue.claim_missing_results_unchecked(text[], interval, integer),
    fairqueue.due_result_hooks_unchecked(text[], interval, integer),
    fairqueue.fail_abandoned_unchecked(text[], integer),
    fairqueue.stale_doorbells_unchecked(text[], interval, integer),
    fairqueue.stalled_lanes_unchecked(integer)
    from public, fairqueue_app;

create function fairqueue.claim(
    p_type text,
    p_batch integer,
    p_pool integer,
    p_lease_s double precision,
    p_locked_by text,
    p_run_id uuid,
    p_plan_names text[],
    p_plan_priorities integer[],
    p_default_priority integer
) returns table (id uuid, tenant_id text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_batch between 1 and 1000,
    format('claim: batch must be from 1 to 1000, got %s', p_batch));
select fairqueue.door_argument(p_pool between p_batch and 10000,
    format('claim: pool must be from the batch (%s) to 10000, got %s', p_batch, p_pool));
select fairqueue.door_argument(p_lease_s > 0 and p_lease_s <= 86400,
    format('claim: lease_s must be over 0 and at most 86400 (a day), got %s', p_lease_s));
select fairqueue.door_argument(p_locked_by <> '' and length(p_locked_by) <= 200,
    'claim: locked_by must be 1 to 200 characters');
select * from fairqueue.claim_unchecked(p_type, p_batch, p_pool, p_lease_s, p_locked_by,
    p_run_id, p_plan_names, p_plan_priorities, p_default_priority);
$$;

create function fairqueue.trim_outputs(p_age interval, p_limit integer) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_age > interval '0',
    format('trim_outputs: the age must be positive, got %s', p_age));
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('trim_outputs: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.trim_outputs_unchecked(p_age, p_limit);
$$;

create function fairqueue.prune_jobs(p_age interval, p_limit integer) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_age > interval '0',
    format('prune_jobs: the age must be positive, got %s', p_age));
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('prune_jobs: limit must be from 1 to 100000, got %s', p_limit));
select fairqueue.prune_jobs_unchecked(p_age, p_limit);
$$;

create function fairqueue.claim_missing_results(p_types text[], p_grace interval, p_limit integer)
returns table (id uuid, tenant_id text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_grace > interval '0',
    format('claim_missing_results: the grace must be positive, got %s', p_grace));
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('claim_missing_results: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.claim_missing_results_unchecked(p_types, p_grace, p_limit);
$$;

create function fairqueue.due_result_hooks(p_types text[], p_grace interval, p_limit integer)
returns table (job_id uuid, tenant_id text, type text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_grace > interval '0',
    format('due_result_hooks: the grace must be positive, got %s', p_grace));
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('due_result_hooks: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.due_result_hooks_unchecked(p_types, p_grace, p_limit);
$$;

create function fairqueue.fail_abandoned(p_types text[], p_limit integer)
returns table (id uuid, type text, tenant_id text, last_error text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('fail_abandoned: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.fail_abandoned_unchecked(p_types, p_limit);
$$;

create function fairqueue.stale_doorbells(p_types text[], p_stale interval, p_limit integer)
returns table (id uuid, tenant_id text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_stale >= interval '0',
    format('stale_doorbells: staleness must not be negative, got %s', p_stale));
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('stale_doorbells: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.stale_doorbells_unchecked(p_types, p_stale, p_limit);
$$;

create function fairqueue.stalled_lanes(p_limit integer)
returns table (tenant_id text, lane text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('stalled_lanes: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.stalled_lanes_unchecked(p_limit);
$$;

alter function fairqueue.claim(text, integer, integer, double precision, text, uuid, text[],
    integer[], integer) owner to fairqueue_owner;
alter function fairqueue.trim_outputs(interval, integer) owner to fairqueue_owner;
alter function fairqueue.prune_jobs(interval, integer) owner to fairqueue_owner;
alter function fairqueue.claim_missing_results(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.due_result_hooks(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.fail_abandoned(text[], integer) owner to fairqueue_owner;
alter function fairqueue.stale_doorbells(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.stalled_lanes(integer) owner to fairqueue_owner;
revoke execute on function
    fairqueue.claim(text, integer, integer, double precision, text, uuid, text[], integer[],
        integer),
    fairqueue.trim_outputs(interval, integer),
    fairqueue.prune_jobs(interval, integer),
    fairqueue.claim_missing_results(text[], interval, integer),
    fairqueue.due_result_hooks(text[], interval, integer),
    fairqueue.fail_abandoned(text[], integer),
    fairqueue.stale_doorbells(text[], interval, integer),
    fairqueue.stalled_lanes(integer)
    from public;
grant execute on function
    fairqueue.claim(text, integer, integer, double precision, text, uuid, text[], integer[],
        integer),
    fairqueue.trim_outputs(interval, integer),
    fairqueue.prune_jobs(interval, integer),
    fairqueue.claim_missing_results(text[], interval, integer),
    fairqueue.due_result_hooks(text[], interval, integer),
    fairqueue.fail_abandoned(text[], integer),
    fairqueue.stale_doorbells(text[], interval, integer),
    fairqueue.stalled_lanes(integer)
    to fairqueue_app;
