-- New jobs take time-ordered ids (fairqueue.new_job_id, sql/functions/job_ids.sql) instead of
-- random ones. Ids already given stay as they are: ids are compared for equality and as the
-- last tie-break of the claim's order, where old and new ids mix as any two ids do.
-- requires: functions/job_ids.sql

-- Only its low twelve bits are used, to order the ids drawn within one millisecond.
create sequence fairqueue.job_id_order as bigint cycle;
alter sequence fairqueue.job_id_order owner to fairqueue_owner;

alter table fairqueue.jobs alter column id set default fairqueue.new_job_id();
