-- A tenant level above groups, for the types whose stages keep fairness between tenants
-- (Stage(fair_share="tenant")). Such a type is listed in tenant_level_types, from its first
-- claim at that level on. Each (type, tenant) of a listed type then has a standing: its served
-- count (the sum of its groups') and its best group's key (the group its next pick comes from),
-- so the claim reads the best tenants from an index, then each tenant's best groups from
-- another. The triggers on served log each change of a listed type's counts and heads in
-- tenant_changes; the claim folds the log into the standings before it reads them.
-- requires: functions/group_key.sql

alter table fairqueue.served
    add column tenant_key text not null
        generated always as (fairqueue.group_tenant_key(group_key)) stored;

-- A tenant's groups in the claim's order within it: fewest served, then the oldest head.
create index served_tenant_order_idx
    on fairqueue.served (type, tenant_key, n, head_created_at, head_id)
    where head_id is not null and not paused;

create table fairqueue.tenant_level_types (
    type text primary key
);

create table fairqueue.tenant_standings (
    type            text not null,
    tenant_key      text not null,
    n               bigint not null default 0,
    plan            text not null default '',
    best_n          bigint,
    best_created_at timestamptz,
    best_id         uuid,
    best_group_key  text,
    primary key (type, tenant_key)
);

-- The claim's order of tenants within one plan: fewest served, then the best group's key.
create index tenant_standings_order_idx
    on fairqueue.tenant_standings (type, plan, n, best_n, best_created_at, best_id)
    where best_id is not null;

-- Appended to by every statement that changes a listed type's served rows, emptied by the
-- claim that folds it: no key, so writers never wait for one another on it.
create table fairqueue.tenant_changes (
    type       text not null,
    tenant_key text not null,
    n_delta    bigint not null
);
create index tenant_changes_type_idx on fairqueue.tenant_changes (type);

alter table fairqueue.tenant_level_types owner to fairqueue_owner;
alter table fairqueue.tenant_standings owner to fairqueue_owner;
alter table fairqueue.tenant_changes owner to fairqueue_owner;
