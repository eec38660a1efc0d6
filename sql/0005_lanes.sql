-- Serial lanes and credits for admitted work.
--
-- A lane (usually a user) runs its first-pass jobs one at a time: at most one is pending or
-- running, the rest wait as 'queued' in admission order. Delta jobs (re-checks of an earlier
-- job, delta_of set) never wait in a lane and never block one. Credits are a ledger: a debit at
-- admission, a refund when the work is given up, each tied to its job, never twice.

alter table fairqueue.jobs add column lane text;
alter table fairqueue.jobs add column delta_of uuid;
alter table fairqueue.jobs add column credit_cost bigint not null default 0 check (credit_cost >= 0);

-- The lane's first-pass jobs by status and age: who holds the lane, who is next.
create index jobs_lane_idx on fairqueue.jobs (tenant_id, lane, status, created_at)
    where lane is not null and delta_of is null and status in ('queued', 'pending', 'running');

create table fairqueue.credits (
    id         bigint generated always as identity primary key,
    tenant_id  text not null,
    job_id     uuid,
    kind       text not null check (kind in ('grant', 'debit', 'refund')),
    amount     bigint not null,
    note       text,
    created_at timestamptz not null default now(),
    check ((kind = 'debit') = (amount < 0)),
    check (kind = 'grant' or job_id is not null)
);

-- Nothing is charged or refunded twice.
create unique index credits_once_idx on fairqueue.credits (job_id, kind) where kind <> 'grant';
create index credits_tenant_idx on fairqueue.credits (tenant_id);

alter table fairqueue.credits owner to fairqueue_owner;
alter table fairqueue.credits enable row level security;
alter table fairqueue.credits force row level security;
create policy credits_owner on fairqueue.credits to fairqueue_owner using (true) with check (true);
create policy credits_tenant on fairqueue.credits to fairqueue_app
    using (tenant_id = fairqueue.current_tenant())
    with check (tenant_id = fairqueue.current_tenant());
grant select, insert on fairqueue.credits to fairqueue_app;

-- A door for the sweeper: lanes whose first-pass work waits although nothing holds the lane
-- (a finalization whose promotion never ran). Tenants and lane keys only.
create function fairqueue.stalled_lanes(p_limit integer)
returns table (tenant_id text, lane text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select q.tenant_id, q.lane
  from fairqueue.jobs q
 where q.status = 'queued' and q.lane is not null and q.delta_of is null
   and not exists (select 1 from fairqueue.jobs h
                    where h.tenant_id is not distinct from q.tenant_id and h.lane = q.lane
                      and h.delta_of is null and h.status in ('pending', 'running'))
 group by q.tenant_id, q.lane
 limit p_limit
$$;

alter function fairqueue.stalled_lanes(integer) owner to fairqueue_owner;
revoke execute on function fairqueue.stalled_lanes(integer) from public;
grant execute on function fairqueue.stalled_lanes(integer) to fairqueue_app;
