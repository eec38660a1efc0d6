-- The queue: one table of jobs, plus who owns them (tenants, groups), what each invocation did
-- (runs), and rationed budgets (quotas).

create table fairqueue.tenants (
    id         text primary key,
    plan       text not null,
    created_at timestamptz not null default now()
);

create table fairqueue.groups (
    id         text primary key,
    tenant_id  text,
    status     text not null default 'active' check (status in ('active', 'paused')),
    created_at timestamptz not null default now()
);

create table fairqueue.jobs (
    id           uuid primary key default gen_random_uuid(),
    type         text not null check (type <> ''),
    payload      jsonb not null default '{}'::jsonb,
    tenant_id    text,
    group_id     text,
    dedupe_key   text,
    status       text not null default 'pending'
                 check (status in ('queued', 'pending', 'running', 'done', 'failed', 'cancelled')),
    attempts     integer not null default 0 check (attempts >= 0),
    max_attempts integer not null default 3 check (max_attempts >= 1),
    run_after    timestamptz not null default now(),
    locked_at    timestamptz,
    lease_until  timestamptz,
    locked_by    text,
    last_error   text,
    run_id       uuid,
    created_at   timestamptz not null default now(),
    finished_at  timestamptz,
    -- When this job last counted as served to its group: done or running jobs only.
    served_at    timestamptz generated always as (
                     case when status in ('done', 'running') then coalesce(finished_at, locked_at) end
                 ) stored
) with (fillfactor = 80);

-- Claimable rows of a type, due first; running rows stay in it so expired leases are found.
create index jobs_claim_idx on fairqueue.jobs (type, run_after)
    where status in ('pending', 'running');

-- Running jobs by lease, so expired leases are found without visiting every pending row.
create index jobs_lease_idx on fairqueue.jobs (type, lease_until) where status = 'running';

-- Asking again while a job is open is a no-op; asking again after it finished is a new job.
create unique index jobs_dedupe_idx on fairqueue.jobs (coalesce(tenant_id, ''), dedupe_key)
    where dedupe_key is not null and status in ('queued', 'pending', 'running');

-- Walks served history by time so the served counter can expire what turns a day old.
create index jobs_served_at_idx on fairqueue.jobs (served_at) where served_at is not null;

create table fairqueue.runs (
    id            uuid primary key default gen_random_uuid(),
    trigger       text not null,
    stop_reason   text check (stop_reason in
                      ('no_work', 'time_budget', 'quota_reserve', 'quota_exhausted', 'error')),
    jobs_done     integer not null default 0,
    jobs_failed   integer not null default 0,
    jobs_deferred integer not null default 0,
    quota_units   bigint not null default 0,
    summary       jsonb not null default '{}'::jsonb,
    error         text,
    started_at    timestamptz not null default now(),
    finished_at   timestamptz,
    check ((finished_at is null) = (stop_reason is null))
);

create index runs_started_at_idx on fairqueue.runs (started_at desc);

create table fairqueue.quotas (
    name       text primary key,
    capacity   bigint not null check (capacity >= 0),
    remaining  bigint not null check (remaining >= 0),
    reserve    bigint not null default 0 check (reserve >= 0),
    period     interval not null check (period > interval '0'),
    resets_at  timestamptz not null
);
