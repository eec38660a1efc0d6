-- A job failed for good owes its stage's give-up hook until the hook has run: the failure sets
-- give_up_owed in its own transaction, the hook clears it in the transaction it runs in, and the
-- sweeper fires again the hooks a dead process still owed (fairqueue.due_give_ups,
-- sql/functions/give_ups.sql). A job that owes its hook stays in fairqueue.jobs until then.

alter table fairqueue.jobs add column give_up_owed boolean not null default false;

create index jobs_give_up_owed_idx on fairqueue.jobs (finished_at) where give_up_owed;

drop index fairqueue.jobs_movable_idx;
create index jobs_movable_idx on fairqueue.jobs (finished_at)
    where status in ('done', 'failed', 'cancelled')
      and not (status = 'done' and output is not null and result_at is null)
      and not give_up_owed;
