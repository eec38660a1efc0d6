-- The one spelling of a group's key: the tenant (with \ and / escaped), a slash, the group id.
-- ('acme', 'inbox') is acme/inbox, ('acme', none) is acme/, (none, none) is /.
create or replace function fairqueue.group_key(p_tenant_id text, p_group_id text) returns text
language sql immutable parallel safe set search_path = pg_catalog, pg_temp
as $$
select replace(replace(coalesce(p_tenant_id, ''), '\', '\\'), '/', '\/') || '/'
       || coalesce(p_group_id, '')
$$;

alter function fairqueue.group_key(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.group_key(text, text) from public, fairqueue_app;
grant execute on function fairqueue.group_key(text, text) to fairqueue_app;
