-- The give-up hooks still owed by jobs failed for good longer than p_grace ago, of the given
-- types, across tenants: their process died (or its hook raised) before the hook ran to the
-- end. Ids, tenants and the error only; each hook then runs under its job's clamp, which
-- locks the job and skips it when another process is firing it.
create or replace function fairqueue.due_give_ups_unchecked(
    p_types text[],
    p_grace interval,
    p_limit integer
) returns table (
    id uuid, type text, tenant_id text, last_error text)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select j.id, j.type, j.tenant_id, j.last_error
  from fairqueue.jobs j
 where j.give_up_owed and j.status = 'failed' and j.finished_at < now() - p_grace
   and j.type = any(p_types)
 order by j.finished_at
 limit p_limit
$$;

alter function fairqueue.due_give_ups_unchecked(text[], interval, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.due_give_ups_unchecked(text[], interval, integer)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs due_give_ups_unchecked as the owner.
create or replace function fairqueue.due_give_ups(
    p_types text[],
    p_grace interval,
    p_limit integer
) returns table (
    id uuid, type text, tenant_id text, last_error text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('due_give_ups: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.due_give_ups_unchecked(p_types,
    fairqueue.door_duration('due_give_ups', 'the grace', p_grace, interval '1 millisecond',
                            interval '1 day'), p_limit);
$$;

alter function fairqueue.due_give_ups(text[], interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.due_give_ups(text[], interval, integer)
    from public, fairqueue_app;
grant execute on function fairqueue.due_give_ups(text[], interval, integer) to fairqueue_app;
