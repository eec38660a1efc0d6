-- Tenants and their plans: the application role sees only the tenant it works for, and makes
-- it or changes its plan only through fairqueue.tenant_set_plan (sql/functions/tenant_plans.sql).
alter table fairqueue.tenants enable row level security;
alter table fairqueue.tenants force row level security;
drop policy if exists tenants_owner on fairqueue.tenants;
create policy tenants_owner on fairqueue.tenants to fairqueue_owner using (true) with check (true);
drop policy if exists tenants_self on fairqueue.tenants;
create policy tenants_self on fairqueue.tenants to fairqueue_app
    using (id = fairqueue.current_tenant()) with check (id = fairqueue.current_tenant());
revoke all on fairqueue.tenants from public, fairqueue_app;
grant select on fairqueue.tenants to fairqueue_app;
