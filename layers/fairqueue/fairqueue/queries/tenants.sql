-- name: set_plan
-- A door (sql/functions/tenant_plans.sql), under the tenant's clamp: the tenant made, or its plan
-- changed.
select fairqueue.tenant_set_plan(%(id)s, %(plan)s);

-- name: set_group_status
-- Under the tenant's clamp. A group is its tenant's (its key is made of both), so another
-- tenant's group of the same id is another row and is left as it is.
insert into fairqueue.groups (id, tenant_id, status) values (%(id)s, %(tenant_id)s, %(status)s)
on conflict (key) do update set status = excluded.status
 where groups.tenant_id is not distinct from %(tenant_id)s;
