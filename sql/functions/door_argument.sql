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
