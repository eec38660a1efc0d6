-- Groups (pause and resume): held to the clamp like the jobs they belong to.
alter table fairqueue.groups enable row level security;
alter table fairqueue.groups force row level security;
drop policy if exists groups_owner on fairqueue.groups;
create policy groups_owner on fairqueue.groups to fairqueue_owner using (true) with check (true);
drop policy if exists groups_tenant on fairqueue.groups;
create policy groups_tenant on fairqueue.groups to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));
revoke all on fairqueue.groups from public, fairqueue_app;
grant select, insert, update, delete on fairqueue.groups to fairqueue_app;
