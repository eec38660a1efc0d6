-- A group's standing carries its tenant's plan (and the plan's quantum) and whether it is paused,
-- so the claim's index can rank and skip groups without reading tenants or groups. One
-- statement-level trigger function copies a plan change and a pause or resume into the standing
-- rows, as the owner; its argument names the column it copies: 'plan' (triggers on tenants) or
-- 'paused' (triggers on groups). A row inserted or updated gives its value, a row deleted the value
-- of no tenant ('') or of a group never paused (false); either way the changed rows reach it as
-- changed_rows. A change is rare, so it looks the rows up without an index of its own. It first
-- waits for the tenant-level claims in flight (fairqueue.lock_tenant_level_claims), then locks the
-- rows it writes in key order across all of the statement's tenants or groups: written in the order
-- they were found, a plan change deadlocked now and then with a claim or an enqueue writing the
-- same rows in another order.

create or replace function fairqueue.copy_to_standings() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    perform fairqueue.lock_tenant_level_claims();
    if tg_argv[0] = 'plan' then
        update fairqueue.served s
           set plan = k.plan, quantum = fairqueue.standing_quantum(s.type, k.plan)
          from (select l.type, l.group_key, c.plan
                  from (select t.id,
                               case when tg_op = 'DELETE' then '' else coalesce(t.plan, '') end
                                   as plan
                          from changed_rows t) c
                  join fairqueue.served l on l.tenant_id = c.id
                 where l.plan <> c.plan
                 order by l.type, l.group_key
                   for no key update of l) k
         where s.type = k.type and s.group_key = k.group_key;
    else
        update fairqueue.served s
           set paused = k.paused
          from (select l.type, l.group_key, c.paused
                  from (select g.key,
                               tg_op <> 'DELETE' and g.status = 'paused' as paused
                          from changed_rows g) c
                  join fairqueue.served l on l.group_key = c.key
                 where l.paused <> c.paused
                 order by l.type, l.group_key
                   for no key update of l) k
         where s.type = k.type and s.group_key = k.group_key;
    end if;
    return null;
end $$;
alter function fairqueue.copy_to_standings() owner to fairqueue_owner;
revoke all on function fairqueue.copy_to_standings() from public, fairqueue_app;

create or replace trigger tenants_plan_inserted after insert on fairqueue.tenants
    referencing new table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('plan');
create or replace trigger tenants_plan_updated after update on fairqueue.tenants
    referencing new table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('plan');
create or replace trigger tenants_removed after delete on fairqueue.tenants
    referencing old table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('plan');
create or replace trigger groups_status_inserted after insert on fairqueue.groups
    referencing new table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('paused');
create or replace trigger groups_status_updated after update on fairqueue.groups
    referencing new table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('paused');
create or replace trigger groups_removed after delete on fairqueue.groups
    referencing old table as changed_rows
    for each statement execute function fairqueue.copy_to_standings('paused');
