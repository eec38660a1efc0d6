-- name: claim_results_to_save
-- A door (sql/functions/result_backoff.sql): locks the batch for the caller's transaction,
-- passing over the jobs waiting out a failed save and those in %(tried)s.
select id, tenant_id
  from fairqueue.claim_results_to_save(%(types)s, %(grace_s)s * interval '1 second', %(limit)s,
                                       %(tried)s::uuid[]);

-- name: note_result_failure
-- A door (sql/functions/result_backoff.sql), under the job's tenant's clamp.
select failures, retry_at from fairqueue.note_result_failure(%(job_id)s, %(error)s);

-- name: tidy_result_failures
-- A door (sql/functions/result_backoff.sql).
select forgotten, failing from fairqueue.tidy_result_failures(%(limit)s);
