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
