-- A database first migrated by the first release still carries that release's row-level served
-- trigger beside the statement-level ones that replaced it (sql/order/jobs_served.sql), so
-- every change to jobs would be counted twice. Dropped where it is left.

drop trigger if exists jobs_served on fairqueue.jobs;
drop function if exists fairqueue.jobs_served_trigger();
