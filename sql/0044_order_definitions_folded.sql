-- The four trigger functions that copied a tenant's plan or a group's pause into the standings
-- are one, fairqueue.copy_to_standings, told by its trigger's argument which column it copies
-- (sql/triggers/standings_sync.sql). Their triggers go with them here and are made again, on
-- the one function, with the rest of the definitions after the migrations.
drop trigger if exists tenants_plan_inserted on fairqueue.tenants;
drop trigger if exists tenants_plan_updated on fairqueue.tenants;
drop trigger if exists tenants_removed on fairqueue.tenants;
drop trigger if exists groups_status_inserted on fairqueue.groups;
drop trigger if exists groups_status_updated on fairqueue.groups;
drop trigger if exists groups_removed on fairqueue.groups;
drop function if exists fairqueue.tenants_plan_changed();
drop function if exists fairqueue.tenants_removed();
drop function if exists fairqueue.groups_status_changed();
drop function if exists fairqueue.groups_removed();

-- A job as the fair order ranks it: its group's key, served count and plan, and its own time and
-- id. The group claim's first jobs travel from claim_firsts to claim_picks as one array of these
-- instead of five parallel arrays (sql/functions/claim.sql); claim_firsts's result type and
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
