-- Schedules (docs/design/schedules.md): recurring work, a tenant's rows like its jobs. Exactly
-- one of cron (five fields, read in `timezone`) and every_s (whole seconds, a minute or more,
-- ticking at its whole multiples since 1970-01-01 UTC). next_tick_at is the next time the
-- sweep owes a job; a sweep reads only the rows it has reached (schedules_due), so its cost
-- follows the due ticks, not the schedules. declared: made from FAIRQUEUE_SCHEDULES, kept in step with the code by the sweep.
create table fairqueue.schedules (
    id uuid primary key default gen_random_uuid(),
    tenant_id text,
    name text not null,
    job_type text not null,
    cron text,
    every_s integer,
    timezone text not null default 'UTC',
    payload jsonb not null default '{}',
    group_id text,
    max_attempts integer not null,
    catch_up text not null default 'one',
    declared boolean not null default false,
    paused boolean not null default false,
    next_tick_at timestamptz not null,
    last_tick_at timestamptz,
    last_job_id uuid,
    created_at timestamptz not null default now(),
    constraint schedules_one_rule check ((cron is null) <> (every_s is null)),
    constraint schedules_every_minute check (every_s is null or every_s >= 60),
    constraint schedules_catch_up check (catch_up in ('none', 'one', 'all'))
);

create unique index schedules_name on fairqueue.schedules (coalesce(tenant_id, ''), name);
-- The sweep's read: due rows only, oldest first.
create index schedules_due on fairqueue.schedules (next_tick_at) where not paused;
alter table fairqueue.schedules owner to fairqueue_owner;
