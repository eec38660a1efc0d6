-- requires: order/standings_sync.sql
-- requires: order/tenant_changes.sql
-- The four trigger functions that copied a tenant's plan or a group's pause into the standings
-- are one, fairqueue.copy_to_standings, told by its trigger's argument which column it copies
-- (sql/order/standings_sync.sql); the three that log how a statement changed the served
-- counts of a type listed for the tenant level are one, fairqueue.log_tenant_changes
-- (sql/order/tenant_changes.sql). Their files, applied first, put the same triggers on the
-- new functions, so the old ones are dropped here with nothing depending on them.
drop function if exists fairqueue.tenants_plan_changed();
drop function if exists fairqueue.tenants_removed();
drop function if exists fairqueue.groups_status_changed();
drop function if exists fairqueue.groups_removed();
drop function if exists fairqueue.served_inserted();
drop function if exists fairqueue.served_updated();
drop function if exists fairqueue.served_deleted();

-- A job as the fair order ranks it: its group's key, served count and plan, and its own time and
-- id. The group claim's first jobs travel from claim_firsts to claim_picks as one array of these
-- instead of five parallel arrays (sql/order/claim.sql); claim_firsts's result type and
-- claim_picks's arguments change with it, so both are dropped here and defined again with the
-- rest of the definitions after the migrations.
create type fairqueue.ranked_job as (
    group_key text,
    served bigint,
    plan text,
    created_at timestamptz,
    id uuid
);
alter type fairqueue.ranked_job owner to fairqueue_owner;
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean);
drop function if exists fairqueue.claim_picks(text, integer, text[], integer[], integer, uuid[],
    timestamptz[], text[], bigint[], text[], boolean);
