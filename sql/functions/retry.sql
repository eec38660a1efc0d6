-- A failed job run again by hand (`fairqueue jobs retry`): back to the start with fresh
-- attempts, wherever it is, in the hot table or already moved to finished_jobs (then it moves
-- back). Only inside the caller's clamp: the door acts on a job of the tenant the caller's
-- transaction works for, and names that tenant too. A lane's first-pass job comes back queued,
-- for the lane's promotion to start in its turn; any other comes back pending and due now. Its
-- give-up hook, if still owed, is owed no more: the job is not given up. p_note goes in front of
-- its last error. The job's id, lane and delta_of; no row when the tenant has no such failed job.
create or replace function fairqueue.retry_failed_unchecked(p_id uuid, p_tenant_id text,
    p_note text)
returns table (id uuid, lane text, delta_of uuid, status text)
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    update fairqueue.jobs j
       set status = case when j.lane is not null and j.delta_of is null then 'queued'
                         else 'pending' end,
           attempts = 0, run_after = now(), finished_at = null, locked_at = null,
           lease_until = null, locked_by = null, give_up_owed = false,
           last_error = p_note || coalesce(j.last_error, '')
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id and j.status = 'failed'
       and fairqueue.within_clamp(j.tenant_id)
    returning j.id, j.lane, j.delta_of, j.status;
    if found then
        return;
    end if;
    return query
    with gone as (
        delete from fairqueue.finished_jobs f
         where f.id = p_id and f.tenant_id is not distinct from p_tenant_id
           and f.status = 'failed' and fairqueue.within_clamp(f.tenant_id)
        returning f.*
    )
    insert into fairqueue.jobs as j
           (id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
            run_after, last_error, run_id, created_at, lane, delta_of, credit_cost, upstream_id,
            released_at, release_tries, release_failing_since, cost, counted)
    select g.id, g.type, g.payload, g.tenant_id, g.group_id, g.dedupe_key,
           case when g.lane is not null and g.delta_of is null then 'queued' else 'pending' end,
           0, g.max_attempts, now(), p_note || coalesce(g.last_error, ''), g.run_id,
           g.created_at, g.lane, g.delta_of, g.credit_cost, g.upstream_id, g.released_at,
           g.release_tries, g.release_failing_since, g.cost, g.counted
      from gone g
    returning j.id, j.lane, j.delta_of, j.status;
end $$;

alter function fairqueue.retry_failed_unchecked(uuid, text, text) owner to fairqueue_owner;
revoke all on function fairqueue.retry_failed_unchecked(uuid, text, text)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs retry_failed_unchecked as the owner.
create or replace function fairqueue.retry_failed(p_id uuid, p_tenant_id text, p_note text)
returns table (id uuid, lane text, delta_of uuid, status text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_id is not null, 'retry_failed: the job id must be given');
select fairqueue.door_argument(p_tenant_id is null or p_tenant_id <> '',
    'retry_failed: the tenant must be null (no tenant) or a non-empty text');
select fairqueue.door_argument(coalesce(length(p_note), 0) between 1 and 1000,
    'retry_failed: the note must be 1 to 1000 characters');
select * from fairqueue.retry_failed_unchecked(p_id, p_tenant_id, p_note);
$$;

alter function fairqueue.retry_failed(uuid, text, text) owner to fairqueue_owner;
revoke all on function fairqueue.retry_failed(uuid, text, text) from public, fairqueue_app;
grant execute on function fairqueue.retry_failed(uuid, text, text) to fairqueue_app;
