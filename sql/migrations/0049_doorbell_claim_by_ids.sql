-- Doorbells are claimed through jobs_claim_by_ids (sql/functions/doorbells.sql), one doorbell or
-- a burst in one statement; the claim of one job by id had no caller left.
drop function if exists fairqueue.job_claim_by_id(uuid, text, text[], double precision[], text,
    uuid);
