-- Jobs of these types whose invocation died on their last attempt: failed here, returned so
-- the caller can run their give-up hooks under each job's tenant clamp.
create or replace function fairqueue.fail_abandoned_unchecked(
    p_types text[],
    p_limit integer
) returns table (
    id uuid, type text, tenant_id text, last_error text)
language sql set search_path = pg_catalog, pg_temp
as $$
update fairqueue.jobs
   set status = 'failed',
       give_up_owed = true,
       finished_at = now(),
       lease_until = null,
       last_error = coalesce(last_error || E'\n', '')
                    || 'lease expired on the last attempt (' || attempts || ' of ' || max_attempts || ')'
 where id in (select j.id
                from fairqueue.jobs j
               where j.status = 'running' and j.lease_until < now()
                 and j.attempts >= j.max_attempts and j.type = any(p_types)
               order by j.lease_until
               limit p_limit
                 for update skip locked)
returning id, type, tenant_id, last_error
$$;

alter function fairqueue.fail_abandoned_unchecked(text[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.fail_abandoned_unchecked(text[], integer) from public,
    fairqueue_app;

-- The door: checks the arguments, then runs fail_abandoned_unchecked as the owner.
create or replace function fairqueue.fail_abandoned(p_types text[], p_limit integer) returns table (
    id uuid, type text, tenant_id text, last_error text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('fail_abandoned: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.fail_abandoned_unchecked(p_types, p_limit);
$$;

alter function fairqueue.fail_abandoned(text[], integer) owner to fairqueue_owner;
revoke all on function fairqueue.fail_abandoned(text[], integer) from public, fairqueue_app;
grant execute on function fairqueue.fail_abandoned(text[], integer) to fairqueue_app;
