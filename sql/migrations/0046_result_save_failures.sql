-- Results the backstop could not save: one row per job whose render or save failed, with when it
-- first failed, how often, and when the backstop may try it again. The backstop's claim passes
-- over a job until its retry time, so a result that keeps failing costs one try per backoff
-- instead of every batch of every pass. Written and read only through the owner's doors
-- (sql/functions/result_backoff.sql); the application role has no privilege on the table.
create table fairqueue.result_save_failures (
    job_id uuid primary key,
    tenant_id text,
    failing_since timestamptz not null default now(),
    failures integer not null default 1 check (failures >= 1),
    retry_at timestamptz not null,
    last_error text not null
);
alter table fairqueue.result_save_failures owner to fairqueue_owner;
revoke all on fairqueue.result_save_failures from public, fairqueue_app;
