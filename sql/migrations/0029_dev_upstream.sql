-- The development upstream's held work, kept in the database so that what one process admitted
-- (`serve --role api`) another releases (`tick`, `serve`), and a door that defines a quota only
-- where none of its name exists, so the example brings its quota without overwriting an
-- operator's (fairqueue.dev_upstream_hold, dev_upstream_release, define_quota_if_absent).
-- requires: functions/dev_upstream.sql
-- requires: functions/quotas.sql

-- One row per piece of work the stand-in service was given: its id is the job's id (the key),
-- released_at when it was first started, releases how many times it was asked to start.
create table fairqueue.dev_upstream_work (
    id text primary key,
    type text not null,
    payload jsonb not null,
    created_at timestamptz not null default now(),
    released_at timestamptz,
    releases integer not null default 0 check (releases >= 0)
);
alter table fairqueue.dev_upstream_work owner to fairqueue_owner;
