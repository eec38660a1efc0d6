-- The credit ledger: a tenant's own entries only, and only ever added to (a debit or a refund
-- is a new row, never a change to an old one), and only through the doors that check what an
-- entry is for (sql/functions/credits.sql, and admission's debit).
alter table fairqueue.credits enable row level security;
alter table fairqueue.credits force row level security;
drop policy if exists credits_owner on fairqueue.credits;
create policy credits_owner on fairqueue.credits to fairqueue_owner using (true) with check (true);
drop policy if exists credits_tenant on fairqueue.credits;
create policy credits_tenant on fairqueue.credits to fairqueue_app
    using (tenant_id = fairqueue.current_tenant())
    with check (tenant_id = fairqueue.current_tenant());
revoke all on fairqueue.credits from public, fairqueue_app;
grant select on fairqueue.credits to fairqueue_app;
