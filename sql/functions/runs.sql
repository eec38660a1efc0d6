-- The runs table is the audit: what each invocation did and why it stopped. A run is opened and
-- closed only through these two doors, which check their arguments; the application role may
-- read runs and change none, so no run can be rewritten or deleted once closed.
--
-- Opens a run for an invocation: its id and start time.
create or replace function fairqueue.open_run(p_trigger text, p_summary jsonb) returns table (
    id uuid, started_at timestamp with time zone)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_trigger <> '' and length(p_trigger) <= 64,
    'open_run: the trigger must be 1 to 64 characters');
select fairqueue.door_argument(jsonb_typeof(p_summary) = 'object'
                                   and octet_length(p_summary::text) <= 1048576,
    'open_run: the summary must be a JSON object of at most 1 MiB');
insert into fairqueue.runs as r (trigger, summary)
values (p_trigger, p_summary)
returning r.id, r.started_at;
$$;

alter function fairqueue.open_run(text, jsonb) owner to fairqueue_owner;
revoke all on function fairqueue.open_run(text, jsonb) from public, fairqueue_app;
grant execute on function fairqueue.open_run(text, jsonb) to fairqueue_app;

-- Closes an open run once, with its stop reason and tallies; a summary given is merged into the
-- one the run was opened with. A run already closed stays as it was.
create or replace function fairqueue.close_run(
    p_id uuid,
    p_stop_reason text,
    p_jobs_done integer,
    p_jobs_failed integer,
    p_jobs_deferred integer,
    p_quota_units bigint,
    p_summary jsonb,
    p_error text
) returns table (id uuid)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(
    p_jobs_done >= 0 and p_jobs_failed >= 0 and p_jobs_deferred >= 0 and p_quota_units >= 0,
    'close_run: the counts must not be negative');
select fairqueue.door_argument(jsonb_typeof(p_summary) = 'object'
                                   and octet_length(p_summary::text) <= 1048576,
    'close_run: the summary must be a JSON object of at most 1 MiB');
select fairqueue.door_argument(p_error is null or length(p_error) <= 10000,
    'close_run: the error must be at most 10000 characters');
update fairqueue.runs as r
   set stop_reason = p_stop_reason,
       jobs_done = p_jobs_done,
       jobs_failed = p_jobs_failed,
       jobs_deferred = p_jobs_deferred,
       quota_units = p_quota_units,
       summary = r.summary || p_summary,
       error = p_error,
       finished_at = now()
 where r.id = p_id and r.finished_at is null
returning r.id;
$$;

alter function fairqueue.close_run(uuid, text, integer, integer, integer, bigint, jsonb,
    text) owner to fairqueue_owner;
revoke all on function fairqueue.close_run(uuid, text, integer, integer, integer, bigint, jsonb,
    text) from public, fairqueue_app;
grant execute on function fairqueue.close_run(uuid, text, integer, integer, integer, bigint, jsonb,
    text) to fairqueue_app;

-- Closes the runs that started more than p_after ago and are still open: their process died
-- (killed, or out of time) before it could close them, since no invocation lives that long.
-- Each is closed as an error that says so, with what it had written; returns how many.
create or replace function fairqueue.close_abandoned_runs(p_after interval) returns integer
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    after interval := fairqueue.door_duration('close_abandoned_runs', 'the age', p_after,
                                              interval '1 minute', interval '7 days');
    closed integer;
begin
    update fairqueue.runs as r
       set stop_reason = 'error',
           error = 'abandoned: the run was still open ' || after::text
                   || ' after it started, so its process ended without closing it;'
                   || ' its jobs were left to their leases',
           finished_at = now()
     where r.finished_at is null and r.started_at < now() - after;
    get diagnostics closed = row_count;
    return closed;
end $$;

alter function fairqueue.close_abandoned_runs(interval) owner to fairqueue_owner;
revoke all on function fairqueue.close_abandoned_runs(interval) from public, fairqueue_app;
grant execute on function fairqueue.close_abandoned_runs(interval) to fairqueue_app;
