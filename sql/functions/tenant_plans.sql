-- A tenant's plan, written only here: the application role reads its own tenant's row but
-- changes none itself (sql/policies/tenants.sql). The tenant is made, or its plan changed, only
-- for the tenant the caller's transaction is clamped to; which plans exist is the library's
-- (fairqueue.plans.PLANS), which checks the name before it calls.
create or replace function fairqueue.tenant_set_plan(p_tenant_id text, p_plan text)
returns void
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_tenant_id is not null
            and p_tenant_id = fairqueue.current_tenant(),
        'tenant_set_plan: a plan is set only for the tenant the transaction is clamped to');
    perform fairqueue.door_argument(coalesce(length(p_plan), 0) between 1 and 200,
        'tenant_set_plan: the plan must be 1 to 200 characters');
    insert into fairqueue.tenants as t (id, plan) values (p_tenant_id, p_plan)
    on conflict (id) do update set plan = excluded.plan where t.plan is distinct from excluded.plan;
end $$;
alter function fairqueue.tenant_set_plan(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_set_plan(text, text) from public, fairqueue_app;
grant execute on function fairqueue.tenant_set_plan(text, text) to fairqueue_app;
