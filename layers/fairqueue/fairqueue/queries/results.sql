-- Every statement below that runs under a tenant's clamp names the tenant as well, as lanes.sql
-- does: a login that bypasses row-level security (a superuser) still touches one tenant's rows.

-- name: result_source
-- Under the tenant's clamp: what a result write needs to know of the job it is for, open or
-- finished. A re-check's result row is its original's while the original is there to see;
-- once retention has dropped it, a row may no longer be made under its id (the trigger
-- results_job), so the re-check's own id keys it. (A login that bypasses the policies sees an
-- original of another tenant, which admission never allows: the save then meets a row of
-- another tenant, or the trigger, and is refused.)
select j.id, j.type, j.tenant_id, j.status, j.output, j.created_at,
       coalesce(o.id, j.id) as result_job_id
  from fairqueue.all_jobs j
  left join fairqueue.all_jobs o on o.id = j.delta_of
 where j.id = %(id)s and j.tenant_id is not distinct from %(tenant_id)s;

-- name: save_result
-- Under the tenant's clamp. The one statement that writes results; precedence is its WHERE:
-- a client save always wins; a worker save replaces only a worker row (never a client row, and
-- a NULL saved_by is a legacy client row), and only with the output of the same or a later job.
-- Every version of the row that lands owes its hook again (hook_fired_at NULL) when one is due.
-- A row of another tenant (a re-check naming another tenant's job as its original) is never
-- replaced: the insert carries this tenant, and the update asks the row for it too.
insert into fairqueue.results as r (job_id, tenant_id, type, body, saved_by, saved_at,
                                    source_job_id, source_created_at, hook_fired_at)
values (%(result_job_id)s, %(tenant_id)s, %(type)s, %(body)s, %(saved_by)s, now(),
        %(source_job_id)s, %(source_created_at)s,
        case when %(hook_due)s then null else now() end)
on conflict (job_id) do update
   set body = excluded.body,
       saved_by = excluded.saved_by,
       saved_at = excluded.saved_at,
       source_job_id = excluded.source_job_id,
       source_created_at = excluded.source_created_at,
       hook_fired_at = excluded.hook_fired_at
 where r.tenant_id is not distinct from %(tenant_id)s
   and (excluded.saved_by = 'client'
        or (r.saved_by = 'worker'
            and (excluded.source_job_id = r.source_job_id
                 or excluded.source_created_at > r.source_created_at)))
returning job_id;

-- name: mark_result_decided
-- A door (sql/functions/lifecycle.sql), under the tenant's clamp: this job's result is written
-- (or was refused by precedence), so the backstop has nothing more to do for it.
select fairqueue.job_result_decided(%(id)s, %(tenant_id)s);

-- name: read_result
-- Under the tenant's clamp.
select job_id, tenant_id, type, body, saved_by, saved_at, source_job_id, hook_fired_at
  from fairqueue.results
 where job_id = %(job_id)s and tenant_id is not distinct from %(tenant_id)s;

-- name: lock_owed_hook
-- Under the tenant's clamp: the result row, if its hook is still owed and no one else is
-- firing it.
select job_id, tenant_id, type, body, saved_by, saved_at, source_job_id
  from fairqueue.results
 where job_id = %(job_id)s and tenant_id is not distinct from %(tenant_id)s
   and hook_fired_at is null
   for update skip locked;

-- name: mark_hook_fired
-- Under the tenant's clamp.
update fairqueue.results
   set hook_fired_at = now()
 where job_id = %(job_id)s and tenant_id is not distinct from %(tenant_id)s;

-- name: due_result_hooks
-- A door (sql/functions/results.sql).
select job_id, tenant_id, type
  from fairqueue.due_result_hooks(%(types)s, %(grace_s)s * interval '1 second', %(limit)s);

-- name: trim_outputs
select fairqueue.trim_outputs(%(age_s)s * interval '1 second', %(limit)s) as trimmed;

-- name: move_finished
-- A door (sql/functions/finished_jobs.sql): a batch of finished jobs out of the hot table.
select fairqueue.move_finished(%(limit)s, %(lock_wait_s)s * interval '1 second') as moved;

-- name: keep_partitions
-- A door (sql/functions/partitions.sql): the finished jobs' days made ahead, the old ones dropped.
select made, dropped, skipped
  from fairqueue.keep_partitions(%(keep_s)s * interval '1 second', %(ahead)s,
                                 %(lock_wait_s)s * interval '1 second');

-- name: missing_results
select within_grace, under_an_hour, under_a_day, older
  from fairqueue.missing_results(%(grace_s)s * interval '1 second');

-- name: finished_without_result
-- Under the tenant's clamp: a type's done jobs that hold an output and have no result yet.
select id, output
  from fairqueue.all_jobs
 where tenant_id is not distinct from %(tenant_id)s and type = %(type)s and status = 'done'
   and output is not null and result_at is null
 order by finished_at;

-- name: results_by_writer
-- Under the tenant's clamp: a type's result rows counted by who saved them; with since, only
-- those saved since then.
select coalesce(saved_by, 'client') as saved_by, count(*) as n
  from fairqueue.results
 where tenant_id is not distinct from %(tenant_id)s and type = %(type)s
   and (%(since)s::timestamptz is null or saved_at >= %(since)s)
 group by 1
 order by 1;
