-- Jobs: the owner sees every row; the application role only rows inside its transaction's
-- clamp (a tenant's, or the system jobs when it asked for those).
alter table fairqueue.jobs enable row level security;
alter table fairqueue.jobs force row level security;
drop policy if exists jobs_owner on fairqueue.jobs;
create policy jobs_owner on fairqueue.jobs to fairqueue_owner using (true) with check (true);
drop policy if exists jobs_tenant on fairqueue.jobs;
create policy jobs_tenant on fairqueue.jobs to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));
revoke all on fairqueue.jobs from public, fairqueue_app;
grant select, insert, update, delete on fairqueue.jobs to fairqueue_app;
