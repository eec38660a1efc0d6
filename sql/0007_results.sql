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
alter table fairqueue.results enable row level security;
alter table fairqueue.results force row level security;
create policy results_owner on fairqueue.results to fairqueue_owner using (true) with check (true);
create policy results_tenant on fairqueue.results to fairqueue_app
    using (fairqueue.within_clamp(tenant_id))
    with check (fairqueue.within_clamp(tenant_id));
grant select, insert, update on fairqueue.results to fairqueue_app;

-- Doors for the backstop sweep and retention: ids, tenant ids and counts only.

-- Locks (for the caller's transaction) done jobs of the given types whose result is missing and
-- that nothing has touched for the grace window, oldest first; skips rows another sweep holds.
create function fairqueue.claim_missing_results(p_types text[], p_grace interval, p_limit integer)
returns table (id uuid, tenant_id text)
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
select j.id, j.tenant_id
  from fairqueue.jobs j
 where j.output is not null and j.result_at is null and j.status = 'done'
   and j.finished_at < now() - p_grace
   and j.type = any(p_types)
 order by j.finished_at
 limit p_limit
   for update of j skip locked
$$;

-- Result rows whose after_result hook is still owed after the grace window, oldest first.
create function fairqueue.due_result_hooks(p_types text[], p_grace interval, p_limit integer)
returns table (job_id uuid, tenant_id text, type text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select r.job_id, r.tenant_id, r.type
  from fairqueue.results r
 where r.hook_fired_at is null and r.saved_at < now() - p_grace and r.type = any(p_types)
 order by r.saved_at
 limit p_limit
$$;

-- Drops the outputs of jobs finished longer ago than p_age; how many.
create function fairqueue.trim_outputs(p_age interval, p_limit integer) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
with trimmed as (
    update fairqueue.jobs set output = null
     where id in (select id from fairqueue.jobs
                   where output is not null and status in ('done', 'failed', 'cancelled')
                     and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
)
select count(*) from trimmed
$$;

-- Deletes jobs finished longer ago than p_age; how many.
create function fairqueue.prune_jobs(p_age interval, p_limit integer) returns bigint
language sql volatile security definer set search_path = pg_catalog, pg_temp
as $$
with pruned as (
    delete from fairqueue.jobs
     where id in (select id from fairqueue.jobs
                   where status in ('done', 'failed', 'cancelled')
                     and finished_at < now() - p_age
                   order by finished_at
                   limit p_limit
                     for update skip locked)
    returning 1
)
select count(*) from pruned
$$;

-- Done jobs still holding an output with no result, counted by how long they have waited.
create function fairqueue.missing_results(p_grace interval)
returns table (within_grace bigint, under_an_hour bigint, under_a_day bigint, older bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select count(*) filter (where finished_at >= now() - p_grace),
       count(*) filter (where finished_at < now() - p_grace
                          and finished_at >= now() - interval '1 hour'),
       count(*) filter (where finished_at < now() - interval '1 hour'
                          and finished_at >= now() - interval '1 day'),
       count(*) filter (where finished_at < now() - interval '1 day')
  from fairqueue.jobs
 where output is not null and result_at is null and status = 'done'
$$;

alter function fairqueue.claim_missing_results(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.due_result_hooks(text[], interval, integer) owner to fairqueue_owner;
alter function fairqueue.trim_outputs(interval, integer) owner to fairqueue_owner;
alter function fairqueue.prune_jobs(interval, integer) owner to fairqueue_owner;
alter function fairqueue.missing_results(interval) owner to fairqueue_owner;
revoke execute on function
    fairqueue.claim_missing_results(text[], interval, integer),
    fairqueue.due_result_hooks(text[], interval, integer),
    fairqueue.trim_outputs(interval, integer),
    fairqueue.prune_jobs(interval, integer),
    fairqueue.missing_results(interval)
    from public;
grant execute on function
    fairqueue.claim_missing_results(text[], interval, integer),
    fairqueue.due_result_hooks(text[], interval, integer),
    fairqueue.trim_outputs(interval, integer),
    fairqueue.prune_jobs(interval, integer),
    fairqueue.missing_results(interval)
    to fairqueue_app;
