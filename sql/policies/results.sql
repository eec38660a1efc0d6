-- Results: held to the clamp like the jobs they come from; the application role never deletes
-- one (retention does, as the owner).
alter table fairqueue.results enable row level security;
alter table fairqueue.results force row level security;
drop policy if exists results_owner on fairqueue.results;
create policy results_owner on fairqueue.results to fairqueue_owner using (true) with check (true);
drop policy if exists results_tenant on fairqueue.results;
create policy results_tenant on fairqueue.results to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));
revoke all on fairqueue.results from public, fairqueue_app;
grant select, insert, update on fairqueue.results to fairqueue_app;
