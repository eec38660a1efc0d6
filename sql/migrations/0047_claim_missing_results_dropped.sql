-- The backstop claims through claim_results_to_save (sql/functions/result_backoff.sql), which
-- passes over results whose saves keep failing; the older claim had no caller left.
drop function if exists fairqueue.claim_missing_results(text[], interval, integer);
drop function if exists fairqueue.claim_missing_results_unchecked(text[], interval, integer);
