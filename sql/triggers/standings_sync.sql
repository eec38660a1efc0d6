-- A group's standing carries its tenant's plan and whether it is paused, so the claim's index
-- can rank and skip groups without reading tenants or groups. These statement-level triggers
-- copy a plan change and a pause or resume into the standing rows, as the owner. A change is
-- rare, so they look the rows up without an index of their own.

create or replace function fairqueue.tenants_plan_changed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    update fairqueue.served s
       set plan = coalesce(t.plan, '')
      from (select n.id, n.plan from new_rows n) t
     where s.tenant_id = t.id and s.plan <> coalesce(t.plan, '');
    return null;
end $$;
alter function fairqueue.tenants_plan_changed() owner to fairqueue_owner;
revoke all on function fairqueue.tenants_plan_changed() from public, fairqueue_app;

create or replace function fairqueue.tenants_removed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    update fairqueue.served s
       set plan = ''
      from old_rows o
     where s.tenant_id = o.id and s.plan <> '';
    return null;
end $$;
alter function fairqueue.tenants_removed() owner to fairqueue_owner;
revoke all on function fairqueue.tenants_removed() from public, fairqueue_app;

create or replace function fairqueue.groups_status_changed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    update fairqueue.served s
       set paused = (g.status = 'paused')
      from new_rows g
     where s.group_key = g.key and s.paused <> (g.status = 'paused');
    return null;
end $$;
alter function fairqueue.groups_status_changed() owner to fairqueue_owner;
revoke all on function fairqueue.groups_status_changed() from public, fairqueue_app;

create or replace function fairqueue.groups_removed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    update fairqueue.served s
       set paused = false
      from old_rows g
     where s.group_key = g.key and s.paused;
    return null;
end $$;
alter function fairqueue.groups_removed() owner to fairqueue_owner;
revoke all on function fairqueue.groups_removed() from public, fairqueue_app;

create or replace trigger tenants_plan_inserted after insert on fairqueue.tenants
    referencing new table as new_rows
    for each statement execute function fairqueue.tenants_plan_changed();
create or replace trigger tenants_plan_updated after update on fairqueue.tenants
    referencing new table as new_rows
    for each statement execute function fairqueue.tenants_plan_changed();
create or replace trigger tenants_removed after delete on fairqueue.tenants
    referencing old table as old_rows
    for each statement execute function fairqueue.tenants_removed();
create or replace trigger groups_status_inserted after insert on fairqueue.groups
    referencing new table as new_rows
    for each statement execute function fairqueue.groups_status_changed();
create or replace trigger groups_status_updated after update on fairqueue.groups
    referencing new table as new_rows
    for each statement execute function fairqueue.groups_status_changed();
create or replace trigger groups_removed after delete on fairqueue.groups
    referencing old table as old_rows
    for each statement execute function fairqueue.groups_removed();
