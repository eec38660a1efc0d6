-- The one spelling of a group's key: the tenant (with \ and / escaped), a slash, the group id.
-- ('acme', 'inbox') is acme/inbox, ('acme', none) is acme/, (none, none) is /.
-- Every name in it is schema-qualified instead of fixed by a search_path setting, which would
-- keep the planner from inlining it into the generated column of every inserted job.
create or replace function fairqueue.group_key(p_tenant_id text, p_group_id text) returns text
language sql immutable parallel safe
as $$
select pg_catalog.replace(pg_catalog.replace(coalesce(p_tenant_id, ''), '\', '\\'), '/', '\/')
       operator(pg_catalog.||) '/' operator(pg_catalog.||) coalesce(p_group_id, '')
$$;

alter function fairqueue.group_key(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.group_key(text, text) from public, fairqueue_app;
grant execute on function fairqueue.group_key(text, text) to fairqueue_app;

-- The tenant part of a group's key, as group_key spells it: acme/inbox is acme, a\/b/x is a\/b,
-- / is the empty key of the jobs with no tenant. The tenant level of the order goes by it.
create or replace function fairqueue.group_tenant_key(p_group_key text) returns text
language sql immutable parallel safe
as $$
select pg_catalog.substring(p_group_key, '^(?:[^\\/]|\\.)*')
$$;

alter function fairqueue.group_tenant_key(text) owner to fairqueue_owner;
revoke all on function fairqueue.group_tenant_key(text) from public, fairqueue_app;
