-- Results: the human-facing artifact of a finished job, written once on the common path.
--
-- A handler's output is stored on its job when it is marked done. The client that watches the
-- job renders the result and saves it (saved_by = 'client'); a backstop sweep saves it
-- (saved_by = 'worker') for done jobs whose result is still missing after a grace window.
-- A job and its re-checks (delta_of) share one result row, keyed by the original job.
-- Precedence lives in one statement (queries/results.sql, save_result): a client save always
-- wins, a worker save never replaces a client row (a NULL saved_by is a legacy client row), and
-- a worker save replaces a worker row only with the output of the same or a later job.

alter table fairqueue.jobs add column output jsonb;
-- When a result write for this job was decided (written, or refused by precedence).
alter table fairqueue.jobs add column result_at timestamptz;

-- The backstop's candidates, oldest first: done jobs that hold an output and have no result.
create index jobs_missing_result_idx on fairqueue.jobs (finished_at)
    where output is not null and result_at is null and status = 'done';
-- Retention: finished jobs by age.
create index jobs_finished_idx on fairqueue.jobs (finished_at)
    where status in ('done', 'failed', 'cancelled');

create table fairqueue.results (
    job_id            uuid primary key,
    tenant_id         text,
    type              text not null,
    body              jsonb not null,
    saved_by          text check (saved_by in ('client', 'worker')),
    saved_at          timestamptz not null default now(),
    -- Which job's output the row holds (the original or one of its re-checks), and when that
    -- job was admitted: a worker row gives way only to the same or a later job.
    source_job_id     uuid not null,
    source_created_at timestamptz not null,
    -- NULL while the stage's after_result hook is owed for this version of the row.
    hook_fired_at     timestamptz
);

create index results_hook_due_idx on fairqueue.results (saved_at) where hook_fired_at is null;

alter table fairqueue.results owner to fairqueue_owner;

