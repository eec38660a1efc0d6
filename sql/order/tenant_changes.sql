-- The tenant level's log: every statement that changes served rows of a type listed in
-- tenant_level_types appends, per tenant of the rows, how its served count changed (zero when
-- only a head, a pause or a plan did). The claim folds the log into the tenant standings
-- (sql/order/tenant_standings.sql). Appending takes no lock that another writer waits for.
-- A statement that changes a type nobody claims by tenant writes nothing here. One
-- statement-level trigger function serves inserts, updates and deletes on served. It runs as
-- whoever wrote served: the triggers and doors that write it run as the owner already.

create or replace function fairqueue.log_tenant_changes() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
    set plan_cache_mode = force_generic_plan
as $$
begin
    if not exists (select 1 from fairqueue.tenant_level_types) then
        return null;
    end if;
    -- An insert brings its rows' counts, a delete takes them away, an update does both: each
    -- kind of statement has only its own transition tables, so each reads them in a statement
    -- of its own.
    if tg_op = 'INSERT' then
        insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
        select n.type, n.tenant_key, sum(n.n)
          from new_rows n
         where n.type in (select l.type from fairqueue.tenant_level_types l)
         group by 1, 2;
    elsif tg_op = 'UPDATE' then
        insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
        select c.type, c.tenant_key, sum(c.n)
          from (select n.type, n.tenant_key, n.n from new_rows n
                union all
                select o.type, o.tenant_key, -o.n from old_rows o) c
         where c.type in (select l.type from fairqueue.tenant_level_types l)
         group by 1, 2;
    else
        insert into fairqueue.tenant_changes (type, tenant_key, n_delta)
        select o.type, o.tenant_key, -sum(o.n)
          from old_rows o
         where o.type in (select l.type from fairqueue.tenant_level_types l)
         group by 1, 2;
    end if;
    return null;
end $$;
alter function fairqueue.log_tenant_changes() owner to fairqueue_owner;
revoke all on function fairqueue.log_tenant_changes() from public, fairqueue_app;

create or replace trigger served_inserted after insert on fairqueue.served
    referencing new table as new_rows
    for each statement execute function fairqueue.log_tenant_changes();
create or replace trigger served_updated after update on fairqueue.served
    referencing old table as old_rows new table as new_rows
    for each statement execute function fairqueue.log_tenant_changes();
create or replace trigger served_deleted after delete on fairqueue.served
    referencing old table as old_rows
    for each statement execute function fairqueue.log_tenant_changes();
