-- Weighted shares at the tenant level (Stage(fair_share="tenant", order="shares")): a tenant's
-- standing carries its plan's quantum, as a group's does. tenant_level_types keeps each plan's
-- quantum beside its name where it is not the default (fairqueue.quanta_map), and the claim by
-- tenant restamps the type's tenant standings when the quanta it is handed differ
-- (sql/order/tenant_standings.sql).
alter table fairqueue.tenant_level_types
    add column plan_names text[] not null default '{}',
    add column plan_quanta integer[] not null default '{}';

-- The tenant claim takes each plan's quantum now, as the group claim does; the old signatures
-- go, and sql/order/ defines the new ones after the migrations.
drop function if exists fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer);
drop function if exists fairqueue.claim_by_tenant_unchecked(text, integer, double precision,
    text, uuid, text[], integer[], integer, integer);
drop function if exists fairqueue.claim_by_tenant_picks(text, integer, text[], integer[],
    integer, integer, boolean);
drop function if exists fairqueue.tenant_level_listed(text, integer);
drop function if exists fairqueue.tenant_standings_restamped(text, integer);
