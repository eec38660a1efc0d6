-- Each group's standing in its type's order, kept beside its served count, so the claim reads
-- the best groups from an index instead of walking every group with pending work.
--
-- A served row now also carries the group's head (its oldest due pending job), the earliest
-- time a pending job of the group that is not yet due comes due (a lower bound: the claim looks
-- again once it has passed), the tenant's plan ('' when there is none) and whether the group is
-- paused. The triggers on jobs keep the head exact in the transaction that changes the jobs, the
-- triggers on tenants and groups keep the plan and the pause. The claim locks the rows it takes
-- (skip locked), so concurrent claimers take different groups.

alter table fairqueue.served
    add column tenant_id text,
    add column plan text not null default '',
    add column paused boolean not null default false,
    add column head_created_at timestamptz,
    add column head_id uuid,
    add column wake_at timestamptz;

-- The claim's order within one plan: fewest served, then the oldest head.
create index served_order_idx on fairqueue.served (type, plan, n, head_created_at, head_id)
    where head_id is not null and not paused;

-- Groups whose not-yet-due jobs have come due.
create index served_wake_idx on fairqueue.served (type, wake_at) where wake_at is not null;

-- The standings of the work already queued, under a lock that keeps jobs still while they are
-- read.
lock table fairqueue.jobs in share mode;

insert into fairqueue.served as s (type, group_key, n, tenant_id, plan, paused, head_created_at,
                                   head_id, wake_at)
select w.type, w.group_key, 0, w.tenant_id, coalesce(t.plan, ''), coalesce(g.status = 'paused', false),
       h.created_at, h.id, w.wake_at
  from (select j.type, j.group_key, min(j.tenant_id) as tenant_id,
               min(j.run_after) filter (where j.run_after > now()) as wake_at
          from fairqueue.jobs j
         where j.status = 'pending'
         group by 1, 2) w
  left join lateral (
      select j.created_at, j.id
        from fairqueue.jobs j
       where j.type = w.type and j.group_key = w.group_key and j.status = 'pending'
         and j.run_after <= now()
       order by j.type, j.group_key, j.created_at, j.id
       limit 1) h on true
  left join fairqueue.tenants t on t.id = w.tenant_id
  left join fairqueue.groups g on g.key = w.group_key
 order by 1, 2
on conflict (type, group_key) do update
   set tenant_id = excluded.tenant_id, plan = excluded.plan, paused = excluded.paused,
       head_created_at = excluded.head_created_at, head_id = excluded.head_id,
       wake_at = excluded.wake_at;

-- The claim no longer takes a pool of candidates, and a short claim no longer probes for unheld
-- work: it moves past the groups other claimers hold by itself.
drop function if exists fairqueue.claim(text, integer, integer, double precision, text, uuid,
    text[], integer[], integer);
drop function if exists fairqueue.claim_unchecked(text, integer, integer, double precision, text,
    uuid, text[], integer[], integer);
drop function if exists fairqueue.claimable_unheld(text);
