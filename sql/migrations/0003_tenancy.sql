-- Tenant isolation enforced by Postgres.
--
-- fairqueue_owner owns every object; fairqueue_app is what the library runs as: it owns
-- nothing, has no BYPASSRLS, and sees a tenant's rows only inside a transaction that set
-- fairqueue.tenant_id (set_config(..., true), so the setting dies with the transaction). A
-- login role for the application is granted fairqueue_app; see docs/tenancy.md. The policies and
-- grants are in sql/policies/, the clamp in sql/functions/tenant_clamp.sql.

do $$
begin
    begin
        create role fairqueue_owner nologin;
    exception when duplicate_object then null;
    end;
    begin
        create role fairqueue_app nologin;
    exception when duplicate_object then null;
    end;
end $$;

-- The migrating role must be able to hand objects to the owner.
grant fairqueue_owner to current_user;

alter schema fairqueue owner to fairqueue_owner;
alter table fairqueue.migrations owner to fairqueue_owner;
alter table fairqueue.tenants owner to fairqueue_owner;
alter table fairqueue.groups owner to fairqueue_owner;
alter table fairqueue.jobs owner to fairqueue_owner;
alter table fairqueue.runs owner to fairqueue_owner;
alter table fairqueue.quotas owner to fairqueue_owner;
alter table fairqueue.served owner to fairqueue_owner;
alter table fairqueue.served_watermark owner to fairqueue_owner;

