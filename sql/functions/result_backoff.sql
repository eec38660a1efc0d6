-- The backstop's record of results it could not save (fairqueue.result_save_failures), and its
-- claim, which passes over a job whose retry time has not come and the jobs tried earlier in the
-- same pass. A failed save waits 1 minute before its next try, doubling up to 10 minutes.

-- Locks (for the caller's transaction) done jobs of the given types whose result is missing,
-- that nothing has touched for the grace window, that are not waiting out a failed save and
-- that are not in p_tried; oldest first, skipping rows another sweep holds.
create or replace function fairqueue.claim_results_to_save_unchecked(
    p_types text[],
    p_grace interval,
    p_limit integer,
    p_tried uuid[]
) returns table (
    id uuid, tenant_id text)
language sql set search_path = pg_catalog, pg_temp
as $$
select j.id, j.tenant_id
  from fairqueue.jobs j
 where j.output is not null and j.result_at is null and j.status = 'done'
   and j.finished_at < now() - p_grace
   and j.type = any(p_types)
   and j.id <> all(p_tried)
   and not exists (select from fairqueue.result_save_failures f
                    where f.job_id = j.id and f.retry_at > now())
 order by j.finished_at
 limit p_limit
   for update of j skip locked
$$;

alter function fairqueue.claim_results_to_save_unchecked(text[], interval, integer, uuid[])
    owner to fairqueue_owner;
revoke all on function fairqueue.claim_results_to_save_unchecked(text[], interval, integer,
    uuid[]) from public, fairqueue_app;

-- The door: checks the arguments, then runs claim_results_to_save_unchecked as the owner.
create or replace function fairqueue.claim_results_to_save(
    p_types text[],
    p_grace interval,
    p_limit integer,
    p_tried uuid[]
) returns table (
    id uuid, tenant_id text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 10000,
    format('claim_results_to_save: limit must be from 1 to 10000, got %s', p_limit));
select fairqueue.door_argument(p_tried is not null and cardinality(p_tried) <= 1000000,
    'claim_results_to_save: the jobs tried must be an array of at most 1000000 ids');
select * from fairqueue.claim_results_to_save_unchecked(p_types,
    fairqueue.result_grace('claim_results_to_save', p_grace), p_limit, p_tried);
$$;

alter function fairqueue.claim_results_to_save(text[], interval, integer, uuid[])
    owner to fairqueue_owner;
revoke all on function fairqueue.claim_results_to_save(text[], interval, integer, uuid[])
    from public, fairqueue_app;
grant execute on function fairqueue.claim_results_to_save(text[], interval, integer, uuid[])
    to fairqueue_app;

-- Records that the result of job p_job_id could not be saved: a first failure starts its
-- record, a later one counts it and doubles the wait. Only for a done job of the caller's clamp
-- whose result is still missing; the failures so far and the next try's time, no row otherwise.
create or replace function fairqueue.note_result_failure_unchecked(p_job_id uuid, p_error text)
returns table (failures integer, retry_at timestamptz)
language sql set search_path = pg_catalog, pg_temp
as $$
insert into fairqueue.result_save_failures as f (job_id, tenant_id, retry_at, last_error)
select j.id, j.tenant_id, now() + interval '1 minute', p_error
  from fairqueue.jobs j
 where j.id = p_job_id and j.status = 'done' and j.output is not null and j.result_at is null
   and fairqueue.within_clamp(j.tenant_id)
on conflict (job_id) do update
   set failures = f.failures + 1,
       retry_at = now() + least(interval '1 minute' * power(2, least(f.failures, 10)),
                                interval '10 minutes'),
       last_error = excluded.last_error
returning f.failures, f.retry_at
$$;

alter function fairqueue.note_result_failure_unchecked(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.note_result_failure_unchecked(uuid, text)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs note_result_failure_unchecked as the owner.
create or replace function fairqueue.note_result_failure(p_job_id uuid, p_error text)
returns table (failures integer, retry_at timestamptz)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_job_id is not null,
    'note_result_failure: the job id must be given');
select fairqueue.door_argument(coalesce(length(p_error), 0) between 1 and 2000,
    'note_result_failure: the error must be 1 to 2000 characters');
select * from fairqueue.note_result_failure_unchecked(p_job_id, p_error);
$$;

alter function fairqueue.note_result_failure(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.note_result_failure(uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.note_result_failure(uuid, text) to fairqueue_app;

-- Forgets up to p_limit records of jobs whose result no longer waits (saved, trimmed, moved out
-- of the hot table), then counts the jobs whose result still fails to save. Bookkeeping of the
-- owner's own table: nothing a caller passes picks which rows go.
create or replace function fairqueue.tidy_result_failures_unchecked(p_limit integer)
returns table (forgotten bigint, failing bigint)
language sql set search_path = pg_catalog, pg_temp
as $$
with settled as (
    select f.job_id
      from fairqueue.result_save_failures f
     where not exists (select from fairqueue.jobs j
                        where j.id = f.job_id and j.status = 'done' and j.output is not null
                          and j.result_at is null)
     limit p_limit
), gone as (
    delete from fairqueue.result_save_failures f
     using settled s
     where f.job_id = s.job_id
    returning f.job_id
)
select (select count(*) from gone),
       (select count(*) from fairqueue.result_save_failures f
         where not exists (select from gone g where g.job_id = f.job_id))
$$;

alter function fairqueue.tidy_result_failures_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.tidy_result_failures_unchecked(integer)
    from public, fairqueue_app;

-- The door: checks the argument, then runs tidy_result_failures_unchecked as the owner.
create or replace function fairqueue.tidy_result_failures(p_limit integer)
returns table (forgotten bigint, failing bigint)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 100000,
    format('tidy_result_failures: limit must be from 1 to 100000, got %s', p_limit));
select * from fairqueue.tidy_result_failures_unchecked(p_limit);
$$;

alter function fairqueue.tidy_result_failures(integer) owner to fairqueue_owner;
revoke all on function fairqueue.tidy_result_failures(integer) from public, fairqueue_app;
grant execute on function fairqueue.tidy_result_failures(integer) to fairqueue_app;
