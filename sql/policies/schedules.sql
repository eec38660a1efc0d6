-- Schedules: held to the clamp like the jobs they make. The application role reads its
-- tenant's rows and changes them only through the doors of sql/functions/schedules.sql.
alter table fairqueue.schedules enable row level security;
alter table fairqueue.schedules force row level security;
drop policy if exists schedules_owner on fairqueue.schedules;
create policy schedules_owner on fairqueue.schedules to fairqueue_owner
    using (true) with check (true);
drop policy if exists schedules_tenant on fairqueue.schedules;
create policy schedules_tenant on fairqueue.schedules to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));
revoke all on fairqueue.schedules from public, fairqueue_app;
grant select on fairqueue.schedules to fairqueue_app;
