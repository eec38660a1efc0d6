-- How long a missing result waits for its client before the backstop saves it, as the result
-- doors take it: a millisecond to an hour (the longest grace is what trim_outputs keeps
-- an output twice as long as; sql/functions/retention.sql). The bound of all three, once.
create or replace function fairqueue.result_grace(p_door text, p_grace interval) returns interval
language sql set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_duration(p_door, 'the grace', p_grace, interval '1 millisecond',
                               interval '1 hour')
$$;
alter function fairqueue.result_grace(text, interval) owner to fairqueue_owner;
revoke all on function fairqueue.result_grace(text, interval) from public, fairqueue_app;

-- Result rows whose after_result hook is still owed after the grace window, oldest first.
create or replace function fairqueue.due_result_hooks_unchecked(
    p_types text[],
    p_grace interval,
    p_limit integer
) returns table (
    job_id uuid, tenant_id text, type text)
language sql stable set search_path = pg_catalog, pg_temp
as $$
select r.job_id, r.tenant_id, r.type
  from fairqueue.results r
 where r.hook_fired_at is null and r.saved_at < now() - p_grace and r.type = any(p_types)
 order by r.saved_at
 limit p_limit
$$;

alter function fairqueue.due_result_hooks_unchecked(text[], interval,
    integer) owner to fairqueue_owner;
revoke all on function fairqueue.due_result_hooks_unchecked(text[], interval, integer) from public,
    fairqueue_app;

-- The door: checks the arguments, then runs due_result_hooks_unchecked as the owner.
create or replace function fairqueue.due_result_hooks(
    p_types text[],
    p_grace interval,
    p_limit integer
) returns table (
    job_id uuid, tenant_id text, type text)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('due_result_hooks: limit must be from 1 to 10000, got %s', p_limit));
select * from fairqueue.due_result_hooks_unchecked(p_types,
    fairqueue.result_grace('due_result_hooks', p_grace), p_limit);
$$;

alter function fairqueue.due_result_hooks(text[], interval, integer) owner to fairqueue_owner;
revoke all on function fairqueue.due_result_hooks(text[], interval, integer) from public,
    fairqueue_app;
grant execute on function fairqueue.due_result_hooks(text[], interval, integer) to fairqueue_app;

-- Done jobs still holding an output with no result, counted by how long they have waited.
create or replace function fairqueue.missing_results_unchecked(p_grace interval) returns table (
    within_grace bigint, under_an_hour bigint, under_a_day bigint, older bigint)
language sql stable set search_path = pg_catalog, pg_temp
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

alter function fairqueue.missing_results_unchecked(interval) owner to fairqueue_owner;
revoke all on function fairqueue.missing_results_unchecked(interval) from public, fairqueue_app;

-- The door: checks the grace, then runs missing_results_unchecked as the owner.
create or replace function fairqueue.missing_results(p_grace interval) returns table (
    within_grace bigint, under_an_hour bigint, under_a_day bigint, older bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select * from fairqueue.missing_results_unchecked(
    fairqueue.result_grace('missing_results', p_grace));
$$;

alter function fairqueue.missing_results(interval) owner to fairqueue_owner;
revoke all on function fairqueue.missing_results(interval) from public, fairqueue_app;
grant execute on function fairqueue.missing_results(interval) to fairqueue_app;

-- A result row is keyed by its job's id alone, so a row made under another tenant's job would
-- hold that job's result for good. A row is for a job of its own tenant, open or finished, that
-- the writer can see: under the application role's clamp, a job of the clamp's tenant; never
-- another tenant's job, nor one that does not exist. Refused as a key to a missing row is
-- (foreign_key_violation). It runs as the writer, so the clamp's policies decide what it sees.
create or replace function fairqueue.result_row_job() returns trigger
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    if exists (select from fairqueue.jobs j
                where j.id = new.job_id and j.tenant_id is not distinct from new.tenant_id)
       or exists (select from fairqueue.finished_jobs f
                   where f.id = new.job_id and f.tenant_id is not distinct from new.tenant_id)
    then
        return new;
    end if;
    raise exception using
        errcode = 'foreign_key_violation',
        message = format('a result row is for a job of its own tenant: no job %s of %s',
                         new.job_id, coalesce('tenant ' || new.tenant_id, 'the system'));
end $$;
alter function fairqueue.result_row_job() owner to fairqueue_owner;
revoke all on function fairqueue.result_row_job() from public, fairqueue_app;

drop trigger if exists results_job on fairqueue.results;
create trigger results_job before insert or update of job_id, tenant_id on fairqueue.results
    for each row execute function fairqueue.result_row_job();
