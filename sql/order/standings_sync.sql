-- A group's standing carries its tenant's plan and whether it is paused, so the claim's index
-- can rank and skip groups without reading tenants or groups. These statement-level triggers
-- copy a plan change and a pause or resume into the standing rows, as the owner. A change is
-- rare, so they look the rows up without an index of their own. Each first waits for the
-- tenant-level claims in flight (fairqueue.lock_tenant_level_claims), then locks the rows it
-- writes in key order across all of the statement's tenants or groups: written in the order
-- they were found, a plan change deadlocked now and then with a claim or an enqueue writing the
-- same rows in another order.

create or replace function fairqueue.tenants_plan_changed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    perform fairqueue.lock_tenant_level_claims();
    update fairqueue.served s
       set plan = k.plan
      from (select l.type, l.group_key, coalesce(n.plan, '') as plan
              from new_rows n
              join fairqueue.served l on l.tenant_id = n.id
             where l.plan <> coalesce(n.plan, '')
             order by l.type, l.group_key
               for no key update of l) k
     where s.type = k.type and s.group_key = k.group_key;
    return null;
end $$;
alter function fairqueue.tenants_plan_changed() owner to fairqueue_owner;
revoke all on function fairqueue.tenants_plan_changed() from public, fairqueue_app;

create or replace function fairqueue.tenants_removed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    perform fairqueue.lock_tenant_level_claims();
    update fairqueue.served s
       set plan = ''
      from (select l.type, l.group_key
              from fairqueue.served l
             where l.tenant_id in (select o.id from old_rows o) and l.plan <> ''
             order by l.type, l.group_key
               for no key update) k
     where s.type = k.type and s.group_key = k.group_key;
    return null;
end $$;
alter function fairqueue.tenants_removed() owner to fairqueue_owner;
revoke all on function fairqueue.tenants_removed() from public, fairqueue_app;

create or replace function fairqueue.groups_status_changed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    perform fairqueue.lock_tenant_level_claims();
    update fairqueue.served s
       set paused = k.paused
      from (select l.type, l.group_key, g.status = 'paused' as paused
              from new_rows g
              join fairqueue.served l on l.group_key = g.key
             where l.paused <> (g.status = 'paused')
             order by l.type, l.group_key
               for no key update of l) k
     where s.type = k.type and s.group_key = k.group_key;
    return null;
end $$;
alter function fairqueue.groups_status_changed() owner to fairqueue_owner;
revoke all on function fairqueue.groups_status_changed() from public, fairqueue_app;

create or replace function fairqueue.groups_removed() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    perform fairqueue.lock_tenant_level_claims();
    update fairqueue.served s
       set paused = false
      from (select l.type, l.group_key
              from fairqueue.served l
             where l.group_key in (select g.key from old_rows g) and l.paused
             order by l.type, l.group_key
               for no key update) k
     where s.type = k.type and s.group_key = k.group_key;
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
