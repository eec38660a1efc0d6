-- name: set_plan
-- Under the tenant's clamp; the row is the tenant itself, named by its id.
insert into fairqueue.tenants (id, plan) values (%(id)s, %(plan)s)
on conflict (id) do update set plan = excluded.plan;

-- name: set_group_status
-- Under the tenant's clamp. A group id another tenant holds is left as it is: the clamp alone
-- would not stop a login that bypasses row-level security (a superuser) from changing it.
insert into fairqueue.groups (id, tenant_id, status) values (%(id)s, %(tenant_id)s, %(status)s)
on conflict (id) do update set status = excluded.status
 where groups.tenant_id is not distinct from %(tenant_id)s
returning id;
