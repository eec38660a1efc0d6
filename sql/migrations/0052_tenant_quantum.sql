-- A quantum at the tenant level (Stage(fair_share="tenant", quantum=q)): the tenant at the top
-- of the order gives the rest of its current quantum in a row, so the tenant claim ranks
-- tenants by whole quanta served (n / quantum), read from the tenant standings' index. Each
-- tenant standing carries the quantum it was stamped with, and tenant_level_types the quantum
-- the type's tenant standings carry, which a claim by tenant compares with its own under the
-- type's claim lock and restamps when they differ (sql/order/tenant_standings.sql).
alter table fairqueue.tenant_standings
    add column quantum integer not null default 1 check (quantum between 1 and 1000);
alter table fairqueue.tenant_level_types
    add column quantum integer not null default 1 check (quantum between 1 and 1000);

drop index fairqueue.tenant_standings_order_idx;
create index tenant_standings_order_idx on fairqueue.tenant_standings
    (type, plan, (n / quantum), best_n, best_created_at, best_id)
    where best_id is not null;

-- The tenant claim's door, body and picks, and the listing, take the quantum now: their old
-- signatures go, and sql/order/ defines them again after the migrations.
drop function if exists fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer);
drop function if exists fairqueue.claim_by_tenant_unchecked(text, integer, double precision,
    text, uuid, text[], integer[], integer);
drop function if exists fairqueue.claim_by_tenant_picks(text, integer, text[], integer[],
    integer, boolean);
drop function if exists fairqueue.tenant_level_listed(text);
