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
