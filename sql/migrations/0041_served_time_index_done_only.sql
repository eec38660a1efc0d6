-- A claim's new row version enters no index of served times any more: the day's expiry finds
-- the running jobs it takes out of the counts through the lease index, which every running job
-- is in (the check below makes it so), and the done jobs still in the hot table (those whose
-- output waits for its result) through an index of their own.
--
-- A running job that was left without a lease by hand was held by no claimer and could never be
-- taken again: it gets a lease that has run out, so the next claim takes it as its next attempt
-- (or the sweep fails it, on its last). A lease counts for no served row, so the triggers on
-- jobs are passed over: a statement trigger fires even for no rows, and mid-way through the
-- migrations the functions it calls may not be defined yet.
do $$
begin
    if exists (select 1 from fairqueue.jobs where status = 'running' and lease_until is null) then
        alter table fairqueue.jobs disable trigger user;
        update fairqueue.jobs
           set lease_until = coalesce(locked_at, now())
         where status = 'running' and lease_until is null;
        alter table fairqueue.jobs enable trigger user;
    end if;
end $$;
alter table fairqueue.jobs
    add constraint jobs_running_leased check (status <> 'running' or lease_until is not null);
create index jobs_served_done_idx on fairqueue.jobs (served_at) where status = 'done';
drop index fairqueue.jobs_served_at_idx;
