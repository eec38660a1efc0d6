-- Tables the application role reads and changes only through doors and triggers that run as the
-- owner: the audit of runs, the quotas (money), and the served counts that decide the order.
revoke all on fairqueue.runs from public, fairqueue_app;
grant select on fairqueue.runs to fairqueue_app;
revoke all on fairqueue.quotas from public, fairqueue_app;
grant select on fairqueue.quotas to fairqueue_app;
revoke all on fairqueue.served from public, fairqueue_app;
-- The counts only: a standing names other tenants' jobs and plans.
grant select (type, group_key, n) on fairqueue.served to fairqueue_app;
revoke all on fairqueue.served_watermark from public, fairqueue_app;
grant select on fairqueue.served_watermark to fairqueue_app;
-- The tenant level of the order: other tenants' standings, read by the claim alone.
revoke all on fairqueue.tenant_level_types from public, fairqueue_app;
revoke all on fairqueue.tenant_standings from public, fairqueue_app;
revoke all on fairqueue.tenant_changes from public, fairqueue_app;
