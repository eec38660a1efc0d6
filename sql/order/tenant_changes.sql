-- The tenant level's log: every statement that changes served rows of a type listed in
-- tenant_level_types appends, per tenant of the rows, how its served count changed (zero when
-- only a head, a pause or a plan did). The claim folds the log into the tenant standings
-- (sql/order/tenant_standings.sql). Appending takes no lock that another writer waits for.
-- A statement that changes a type nobody claims by tenant writes nothing here. They run as
-- whoever wrote served: the triggers and doors that write it run as the owner already.

create or replace function fairqueue.served_inserted() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    if not exists (select 1 from fairqueue.tenant_level_types) then
        return null;
    end if;
    insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
    select n.type, n.tenant_key, sum(n.n)
      from new_rows n
     where n.type in (select l.type from fairqueue.tenant_level_types l)
     group by 1, 2;
    return null;
end $$;
alter function fairqueue.served_inserted() owner to fairqueue_owner;
revoke all on function fairqueue.served_inserted() from public, fairqueue_app;

create or replace function fairqueue.served_updated() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    if not exists (select 1 from fairqueue.tenant_level_types) then
        return null;
    end if;
    insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
    select c.type, c.tenant_key, sum(c.n)
      from (select n.type, n.tenant_key, n.n from new_rows n
            union all
            select o.type, o.tenant_key, -o.n from old_rows o) c
     where c.type in (select l.type from fairqueue.tenant_level_types l)
     group by 1, 2;
    return null;
end $$;
alter function fairqueue.served_updated() owner to fairqueue_owner;
revoke all on function fairqueue.served_updated() from public, fairqueue_app;

create or replace function fairqueue.served_deleted() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    if not exists (select 1 from fairqueue.tenant_level_types) then
        return null;
    end if;
    insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
    select o.type, o.tenant_key, -sum(o.n)
      from old_rows o
     where o.type in (select l.type from fairqueue.tenant_level_types l)
     group by 1, 2;
    return null;
end $$;
alter function fairqueue.served_deleted() owner to fairqueue_owner;
revoke all on function fairqueue.served_deleted() from public, fairqueue_app;

create or replace trigger served_inserted after insert on fairqueue.served
    referencing new table as new_rows
    for each statement execute function fairqueue.served_inserted();
create or replace trigger served_updated after update on fairqueue.served
    referencing old table as old_rows new table as new_rows
    for each statement execute function fairqueue.served_updated();
create or replace trigger served_deleted after delete on fairqueue.served
    referencing old table as old_rows
    for each statement execute function fairqueue.served_deleted();
