-- The tenant level of the order (sql/migrations/0021_tenant_standings.sql): a tenant's standing is
-- its served count, the sum of its groups', and its best group's key, the group its next pick comes
-- from. A tenant whose groups are all paused or have nothing due has no best group and stands
-- nowhere in the order.

-- The best group of each tenant: the first of its groups in the order within it.
create or replace function fairqueue.tenant_best_group(p_type text, p_tenant_key text)
returns table (plan text, n bigint, head_created_at timestamp with time zone, head_id uuid,
               group_key text)
language sql stable rows 1
as $$
select s.plan, s.n, s.head_created_at, s.head_id, s.group_key
  from fairqueue.served s
 where s.type = p_type and s.tenant_key = p_tenant_key
   and s.head_id is not null and not s.paused
 order by s.n, s.head_created_at, s.head_id
 limit 1
$$;
alter function fairqueue.tenant_best_group(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_best_group(text, text) from public, fairqueue_app;

-- Each tenant of the type as it stands now, read from its groups' rows: its served count, the
-- sum of its groups', and its best group (none, and the plan '', when its groups are all paused
-- or have nothing due). The one reading of a tenant's standing from its groups: a listing
-- builds the type's tenant standings from it, and an operator's question ranks tenants by it
-- (tenant_standing_unchecked, sql/functions/job_info.sql) without waiting for a claim's fold.
create or replace function fairqueue.tenant_standings_from_groups(p_type text)
returns table (tenant_key text, n bigint, plan text, best_n bigint,
               best_created_at timestamp with time zone, best_id uuid, best_group_key text)
language sql stable
as $$
select a.tenant_key, a.n, coalesce(b.plan, ''), b.n, b.head_created_at, b.head_id, b.group_key
  from (select s.tenant_key, sum(s.n)::bigint as n
          from fairqueue.served s
         where s.type = p_type
         group by 1) a
  left join lateral fairqueue.tenant_best_group(p_type, a.tenant_key) b on true
$$;
alter function fairqueue.tenant_standings_from_groups(text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_standings_from_groups(text) from public, fairqueue_app;

-- Folds the log of changes into the standings of the type's tenants. One statement, so the
-- log rows it takes and the groups it reads are of one snapshot: every change it folds is in
-- the groups it reads, and a change committed after the snapshot stays in the log for the
-- next fold. The caller holds the type's tenant claim lock, so folds never overlap.
create or replace function fairqueue.tenant_standings_fold(p_type text) returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    with folded as (
        delete from fairqueue.tenant_changes c
         where c.type = p_type
        returning c.tenant_key, c.n_delta
    ),
    changed as (
        select f.tenant_key, sum(f.n_delta)::bigint as n_delta
          from folded f
         group by 1
    )
    insert into fairqueue.tenant_standings as t (type, tenant_key, n, plan, best_n,
                                                 best_created_at, best_id, best_group_key,
                                                 quantum)
    select p_type, c.tenant_key, c.n_delta, coalesce(b.plan, ''), b.n, b.head_created_at,
           b.head_id, b.group_key, fairqueue.tenant_quantum(p_type, coalesce(b.plan, ''))
      from changed c
      left join lateral fairqueue.tenant_best_group(p_type, c.tenant_key) b on true
     order by c.tenant_key
    on conflict (type, tenant_key) do update
       set n = t.n + excluded.n,
           plan = excluded.plan,
           quantum = excluded.quantum,
           best_n = excluded.best_n,
           best_created_at = excluded.best_created_at,
           best_id = excluded.best_id,
           best_group_key = excluded.best_group_key;
end $$;
alter function fairqueue.tenant_standings_fold(text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_standings_fold(text) from public, fairqueue_app;

-- The quantum of a tenant standing of a plan at the tenant level: the plan's in the type's
-- tenant_level_types row, else that row's default, else 1. Every tenant standing carries it,
-- so that the tenant standings' index ranks a type's tenants by whole quanta served. One key
-- read, inlined where it is called.
create or replace function fairqueue.tenant_quantum(p_type text, p_plan text) returns integer
language sql stable
as $$
select coalesce((select fairqueue.plan_quantum(p_plan, l.plan_names, l.plan_quanta, l.quantum)
                   from fairqueue.tenant_level_types l
                  where l.type = p_type),
                1)
$$;
alter function fairqueue.tenant_quantum(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_quantum(text, text) from public, fairqueue_app;

-- Lists the type for the tenant level, once: its tenants' standings are built from the groups'
-- under a lock that lets no statement change served meanwhile (it waits for those in flight),
-- so every later change is logged and none is counted twice. They carry the claim's quanta
-- (as fairqueue.quanta_map keeps them). The caller holds the type's tenant claim lock.
create or replace function fairqueue.tenant_level_listed(
    p_type text,
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    if exists (select 1 from fairqueue.tenant_level_types l where l.type = p_type) then
        return;
    end if;
    lock table fairqueue.served in share mode;
    insert into fairqueue.tenant_level_types (type, quantum, plan_names, plan_quanta)
    select p_type, p_default_quantum, m.names, m.quanta
      from fairqueue.quanta_map(p_plan_names, p_plan_quanta, p_default_quantum) m;
    delete from fairqueue.tenant_changes c where c.type = p_type;
    delete from fairqueue.tenant_standings t where t.type = p_type;
    insert into fairqueue.tenant_standings (type, tenant_key, n, plan, best_n, best_created_at,
                                            best_id, best_group_key, quantum)
    select p_type, t.tenant_key, t.n, t.plan, t.best_n, t.best_created_at, t.best_id,
           t.best_group_key, fairqueue.tenant_quantum(p_type, t.plan)
      from fairqueue.tenant_standings_from_groups(p_type) t;
end $$;
alter function fairqueue.tenant_level_listed(text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.tenant_level_listed(text, text[], integer[], integer)
    from public, fairqueue_app;

-- Makes these the quanta of the type's tenant standings when they are not already (a stage's
-- quantum, its order or a plan's weight changed): one key read otherwise. The caller, a claim
-- by tenant, holds the type's tenant claim lock, and only those claims write tenant standings
-- (the fold, above, stamps a new one with its plan's listed quantum), so no standing is written
-- with an old quantum after the change. Done here rather than where a change of quanta is
-- stamped on the groups' standings (quanta_stamped): that holds the groups' standings locked
-- against writers, and waiting there for this lock would deadlock with a claim by tenant that
-- holds it and writes a group's standing.
create or replace function fairqueue.tenant_standings_restamped(
    p_type text,
    p_plan_names text[],
    p_plan_quanta integer[],
    p_default_quantum integer
) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    names text[];
    quanta integer[];
begin
    select m.names, m.quanta into names, quanta
      from fairqueue.quanta_map(p_plan_names, p_plan_quanta, p_default_quantum) m;
    if exists (select 1 from fairqueue.tenant_level_types l
                where l.type = p_type and l.quantum = p_default_quantum
                  and l.plan_names = names and l.plan_quanta = quanta) then
        return;
    end if;
    update fairqueue.tenant_level_types l
       set quantum = p_default_quantum, plan_names = names, plan_quanta = quanta
     where l.type = p_type;
    update fairqueue.tenant_standings t set quantum = fairqueue.tenant_quantum(t.type, t.plan)
     where t.type = p_type and t.quantum <> fairqueue.tenant_quantum(t.type, t.plan);
end $$;
alter function fairqueue.tenant_standings_restamped(text, text[], integer[], integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.tenant_standings_restamped(text, text[], integer[], integer)
    from public, fairqueue_app;

-- Takes the type off the list when it is claimed by group again: its log would otherwise grow
-- with nobody to fold it. A later claim by tenant lists it again from the groups.
create or replace function fairqueue.tenant_level_unlisted(p_type text) returns void
language plpgsql set search_path = pg_catalog, pg_temp set jit = off
as $$
begin
    if not exists (select 1 from fairqueue.tenant_level_types l where l.type = p_type) then
        return;
    end if;
    delete from fairqueue.tenant_level_types l where l.type = p_type;
    delete from fairqueue.tenant_changes c where c.type = p_type;
    delete from fairqueue.tenant_standings t where t.type = p_type;
end $$;
alter function fairqueue.tenant_level_unlisted(text) owner to fairqueue_owner;
revoke all on function fairqueue.tenant_level_unlisted(text) from public, fairqueue_app;

-- Tenant-level claims of one type take turns: each holds its type's transaction lock. A change
-- that writes the served rows of many groups at once (a plan change, a pause) takes the locks of
-- every tenant-level type first, in the types' order, so that it never holds a row such a claim
-- will wait for while it waits for one the claim holds (a claim holds the rows of the groups it
-- woke, taken in the order they woke, not in key order); the rows it then writes it locks in
-- key order, as every other writer of served does.
create or replace function fairqueue.lock_tenant_claims(p_types text[]) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform pg_advisory_xact_lock(hashtextextended('fairqueue.claim_by_tenant/' || t.type, 0))
       from unnest(p_types) as t (type)
      order by t.type;
end $$;
alter function fairqueue.lock_tenant_claims(text[]) owner to fairqueue_owner;
revoke all on function fairqueue.lock_tenant_claims(text[]) from public, fairqueue_app;

-- The locks of every tenant-level type, for the writers of many groups' served rows above. The
-- served table's own write lock comes first: a type being listed holds that table in share mode
-- until the listing commits, so the list is read only once no listing is in flight, and none
-- can start before this transaction ends. Read before it, the list could miss a type whose
-- listing committed while the writer waited for the table; the writer then held standings a
-- claim of that type waited for, and waited itself for the claim's lock at its next statement.
create or replace function fairqueue.lock_tenant_level_claims() returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    lock table fairqueue.served in row exclusive mode;
    perform fairqueue.lock_tenant_claims(array(select l.type from fairqueue.tenant_level_types l));
end $$;
alter function fairqueue.lock_tenant_level_claims() owner to fairqueue_owner;
revoke all on function fairqueue.lock_tenant_level_claims() from public, fairqueue_app;
