-- Jobs, open and finished: the owner sees every row; the application role only rows inside its
-- transaction's clamp (a tenant's, or the system jobs when it asked for those). It reads
-- finished jobs through fairqueue.finished_jobs or the view fairqueue.all_jobs. It writes no
-- job row itself, open or finished: a job is made by the enqueue and admission doors, and its
-- status, times, attempts and lease change only by the claim and the lifecycle doors
-- (sql/functions/lifecycle.sql), each one transition of the job's life, so no plain statement
-- can rewrite the inputs of the fair order (a done job made cancelled, an old created_at). The
-- policy's check still holds any write a future grant would let through. Each day of
-- finished_jobs carries the same policies and grants it nothing, so no partition is a way around
-- the clamp, whoever reaches it.
create or replace function fairqueue.guard_jobs_table(p_table regclass) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    execute format('alter table %s enable row level security', p_table);
    execute format('alter table %s force row level security', p_table);
    execute format('drop policy if exists jobs_owner on %s', p_table);
    execute format($policy$
        create policy jobs_owner on %s to fairqueue_owner using (true) with check (true)
    $policy$, p_table);
    execute format('drop policy if exists jobs_tenant on %s', p_table);
    execute format($policy$
        create policy jobs_tenant on %s to fairqueue_app
            using (fairqueue.within_clamp(tenant_id))
            with check (fairqueue.within_clamp(tenant_id))
    $policy$, p_table);
    execute format('revoke all on %s from public, fairqueue_app', p_table);
end $$;
alter function fairqueue.guard_jobs_table(regclass) owner to fairqueue_owner;
revoke all on function fairqueue.guard_jobs_table(regclass) from public, fairqueue_app;

select fairqueue.guard_jobs_table('fairqueue.jobs');
select fairqueue.guard_jobs_table('fairqueue.finished_jobs');
select fairqueue.guard_jobs_table(i.inhrelid::regclass)
  from pg_inherits i
 where i.inhparent = 'fairqueue.finished_jobs'::regclass;
grant select on fairqueue.jobs to fairqueue_app;
-- A new job's id draws from it (fairqueue.new_job_id, in admission's checks).
grant usage on sequence fairqueue.job_id_order to fairqueue_app;
grant select on fairqueue.finished_jobs to fairqueue_app;
revoke all on fairqueue.all_jobs from public, fairqueue_app;
grant select on fairqueue.all_jobs to fairqueue_app;
