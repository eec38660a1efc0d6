-- name: set_plan
insert into fairqueue.tenants (id, plan) values (%(id)s, %(plan)s)
on conflict (id) do update set plan = excluded.plan;

-- name: set_group_status
insert into fairqueue.groups (id, tenant_id, status) values (%(id)s, %(tenant_id)s, %(status)s)
on conflict (id) do update set status = excluded.status;
