-- A job's own lifecycle, written only here: the application role reads fairqueue.jobs but
-- changes no row of it (sql/policies/jobs.sql), so a job's status, times, attempts and lease
-- move only by these doors, each of which makes one transition of the job's life and nothing
-- else. Each acts only inside the caller's clamp (fairqueue.within_clamp, what the policies
-- held it to when these were plain statements) and names the tenant as well, so a login that
-- bypasses row-level security still touches one tenant's rows. PL/pgSQL, so each connection
-- plans a statement once and keeps the plan.

-- A claimed job's failed attempt: back to pending after a backoff of 2, 4, 8... units (the claim
-- already counted the attempt), or failed for good, its give-up hook owed, after its last one.
create or replace function fairqueue.job_retry_or_fail(p_id uuid, p_tenant_id text,
    p_locked_by text, p_error text, p_unit_s double precision)
returns table (id uuid, status text, run_after timestamptz)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    perform fairqueue.door_argument(p_unit_s > 0 and p_unit_s <= 86400,
        format('job_retry_or_fail: unit_s must be over 0 and at most 86400, got %s', p_unit_s));
    return query
    update fairqueue.jobs j
       set status = case when j.attempts >= j.max_attempts then 'failed' else 'pending' end,
           run_after = case when j.attempts >= j.max_attempts then j.run_after
                            else now() + power(2, j.attempts) * p_unit_s * interval '1 second' end,
           finished_at = case when j.attempts >= j.max_attempts then now() end,
           give_up_owed = j.attempts >= j.max_attempts,
           lease_until = null,
           last_error = p_error
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'running' and j.locked_by = p_locked_by
    returning j.id, j.status, j.run_after;
end $$;
alter function fairqueue.job_retry_or_fail(uuid, text, text, text, double precision)
    owner to fairqueue_owner;
revoke all on function fairqueue.job_retry_or_fail(uuid, text, text, text, double precision)
    from public, fairqueue_app;
grant execute on function fairqueue.job_retry_or_fail(uuid, text, text, text, double precision)
    to fairqueue_app;

-- A claimed job failed for good at once, whatever attempts it has left.
create or replace function fairqueue.job_fail_now(p_id uuid, p_tenant_id text,
    p_locked_by text, p_error text)
returns table (id uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    update fairqueue.jobs j
       set status = 'failed', give_up_owed = true, finished_at = now(), lease_until = null,
           last_error = p_error
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'running' and j.locked_by = p_locked_by
    returning j.id;
end $$;
alter function fairqueue.job_fail_now(uuid, text, text, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_fail_now(uuid, text, text, text) from public, fairqueue_app;
grant execute on function fairqueue.job_fail_now(uuid, text, text, text) to fairqueue_app;

-- A claimed job put off until p_until (now at the earliest). Not an attempt: the claim's
-- increment is undone.
create or replace function fairqueue.job_defer(p_id uuid, p_tenant_id text, p_locked_by text,
    p_until timestamptz)
returns table (id uuid, run_after timestamptz)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    update fairqueue.jobs j
       set status = 'pending', run_after = greatest(p_until, now()),
           attempts = greatest(j.attempts - 1, 0), lease_until = null
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'running' and j.locked_by = p_locked_by
    returning j.id, j.run_after;
end $$;
alter function fairqueue.job_defer(uuid, text, text, timestamptz) owner to fairqueue_owner;
revoke all on function fairqueue.job_defer(uuid, text, text, timestamptz)
    from public, fairqueue_app;
grant execute on function fairqueue.job_defer(uuid, text, text, timestamptz) to fairqueue_app;

-- Claimed jobs never started, back as they were: pending, the attempt undone.
create or replace function fairqueue.jobs_give_back(p_ids uuid[], p_tenant_id text,
    p_locked_by text)
returns table (id uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    update fairqueue.jobs j
       set status = 'pending', attempts = greatest(j.attempts - 1, 0), lease_until = null
     where j.id = any(p_ids) and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'running' and j.locked_by = p_locked_by
    returning j.id;
end $$;
alter function fairqueue.jobs_give_back(uuid[], text, text) owner to fairqueue_owner;
revoke all on function fairqueue.jobs_give_back(uuid[], text, text) from public, fairqueue_app;
grant execute on function fairqueue.jobs_give_back(uuid[], text, text) to fairqueue_app;

-- The failed job whose give-up hook is owed, locked for the caller's transaction (the one the
-- hook runs in, which job_give_up_fired then clears): no row when it is not owed, or another
-- process is firing it. A door because a row lock needs the right to update the row.
create or replace function fairqueue.job_lock_owed_give_up(p_id uuid, p_tenant_id text)
returns table (id uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    select j.id
      from fairqueue.jobs j
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'failed' and j.give_up_owed
       for update skip locked;
end $$;
alter function fairqueue.job_lock_owed_give_up(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_lock_owed_give_up(uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.job_lock_owed_give_up(uuid, text) to fairqueue_app;

-- A failed job's give-up hook ran to its end: owed no more. Whether it was owed.
create or replace function fairqueue.job_give_up_fired(p_id uuid, p_tenant_id text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    update fairqueue.jobs j
       set give_up_owed = false
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'failed' and j.give_up_owed;
    return found;
end $$;
alter function fairqueue.job_give_up_fired(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_give_up_fired(uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.job_give_up_fired(uuid, text) to fairqueue_app;

-- A job no claim holds yet (queued or pending) cancelled; a running or finished one is left as
-- it is (no row). p_note becomes its last error.
create or replace function fairqueue.job_cancel(p_id uuid, p_tenant_id text, p_note text)
returns table (status text, lane text, delta_of uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(coalesce(length(p_note), 0) between 1 and 1000,
        'job_cancel: the note must be 1 to 1000 characters');
    return query
    update fairqueue.jobs j
       set status = 'cancelled', finished_at = now(), last_error = p_note
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status in ('queued', 'pending')
    returning j.status, j.lane, j.delta_of;
end $$;
alter function fairqueue.job_cancel(uuid, text, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_cancel(uuid, text, text) from public, fairqueue_app;
grant execute on function fairqueue.job_cancel(uuid, text, text) to fairqueue_app;

-- The job's held upstream work has been started: recorded once.
create or replace function fairqueue.job_released(p_id uuid, p_tenant_id text)
returns table (id uuid)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    update fairqueue.jobs j
       set released_at = now(), release_failing_since = null
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id) and j.released_at is null
    returning j.id;
end $$;
alter function fairqueue.job_released(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_released(uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.job_released(uuid, text) to fairqueue_app;

-- A claimed job whose held upstream work could not be started. Not an attempt: the claim's
-- increment is undone. Inside the window (from the first failed try) it waits p_delay_s for
-- its next try; past it, it fails for good.
create or replace function fairqueue.job_release_failed(p_id uuid, p_tenant_id text,
    p_locked_by text, p_error text, p_window_s double precision, p_delay_s double precision)
returns table (id uuid, status text, run_after timestamptz)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_window_s > 0 and p_delay_s >= 0,
        format('job_release_failed: window_s must be over 0 and delay_s at least 0, got %s and %s',
               p_window_s, p_delay_s));
    return query
    update fairqueue.jobs j
       set release_tries = j.release_tries + 1,
           release_failing_since = coalesce(j.release_failing_since, now()),
           attempts = greatest(j.attempts - 1, 0),
           lease_until = null,
           last_error = p_error,
           status = case when f.window_passed then 'failed' else 'pending' end,
           finished_at = case when f.window_passed then now() end,
           give_up_owed = f.window_passed,
           run_after = case when f.window_passed then j.run_after
                            else now() + p_delay_s * interval '1 second' end
      from (select now() - coalesce(o.release_failing_since, now())
                       >= p_window_s * interval '1 second' as window_passed
              from fairqueue.jobs o
             where o.id = p_id) f
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id)
       and j.status = 'running' and j.locked_by = p_locked_by
    returning j.id, j.status, j.run_after;
end $$;
alter function fairqueue.job_release_failed(uuid, text, text, text, double precision,
    double precision) owner to fairqueue_owner;
revoke all on function fairqueue.job_release_failed(uuid, text, text, text, double precision,
    double precision) from public, fairqueue_app;
grant execute on function fairqueue.job_release_failed(uuid, text, text, text, double precision,
    double precision) to fairqueue_app;

-- A finished job's result is written (or was refused by precedence): the backstop has nothing
-- more to do for it. Whether it was still undecided.
create or replace function fairqueue.job_result_decided(p_id uuid, p_tenant_id text)
returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    update fairqueue.jobs j
       set result_at = now()
     where j.id = p_id and j.tenant_id is not distinct from p_tenant_id
       and fairqueue.within_clamp(j.tenant_id) and j.result_at is null;
    return found;
end $$;
alter function fairqueue.job_result_decided(uuid, text) owner to fairqueue_owner;
revoke all on function fairqueue.job_result_decided(uuid, text) from public, fairqueue_app;
grant execute on function fairqueue.job_result_decided(uuid, text) to fairqueue_app;

-- Under the lane's lock (the caller takes it): the lane's oldest queued first-pass job becomes
-- pending and due now, unless a first-pass job already holds the lane.
create or replace function fairqueue.lane_promote_next(p_tenant_id text, p_lane text)
returns table (id uuid, type text)
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    if not coalesce(fairqueue.within_clamp(p_tenant_id), false) then
        return;
    end if;
    return query
    update fairqueue.jobs j
       set status = 'pending', run_after = now()
     where j.id = (select q.id from fairqueue.jobs q
                    where q.tenant_id is not distinct from p_tenant_id and q.lane = p_lane
                      and q.delta_of is null and q.status = 'queued'
                    order by q.created_at, q.id
                    limit 1)
       and not exists (select 1 from fairqueue.jobs h
                        where h.tenant_id is not distinct from p_tenant_id and h.lane = p_lane
                          and h.delta_of is null and h.status in ('pending', 'running'))
    returning j.id, j.type;
end $$;
alter function fairqueue.lane_promote_next(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.lane_promote_next(text, text) from public, fairqueue_app;
grant execute on function fairqueue.lane_promote_next(text, text) to fairqueue_app;
