-- Admission (fairqueue.lanes.admit): the checks under the lane's lock, then the insert and the
-- debit; for a stage with an upstream service the two are called apart, with the service asked
-- to hold the work in between, and otherwise as one statement (fairqueue.admission), which on an
-- autocommit connection is a transaction of its own: one round trip. The checks run as the
-- caller: row-level security holds the caller's clamp, and every query names the tenant as
-- well. The insert is a door run as the owner, since the application role writes no job and no
-- credit itself (sql/policies/jobs.sql, credits.sql): it checks the clamp again. PL/pgSQL, so
-- that each statement sees what committed before the lock was granted (a fresh snapshot per
-- statement) and keeps its plan for the connection's life, with no prepared statement a
-- transaction pooler could trip on.

-- The transaction is clamped to the tenant unless it is clamped already; when it is clamped to
-- another, matches is false and nothing else is done. Then, under the lane's lock (and the
-- tenant's balance lock when the job costs credits): a new job id, whether the delta's earlier
-- job is in this lane, the balance, whether first-pass work already holds or waits in the lane,
-- whether an open job of the tenant has the dedupe key. The locks' keys are spelled by
-- fairqueue.lanes (lock_key) and passed in.
create or replace function fairqueue.admission_checks(
    p_tenant_id text, p_lane text, p_lane_lock integer, p_lane_key text,
    p_credit_lock integer, p_credit_key text, p_charge bigint, p_delta_of uuid,
    p_dedupe_key text)
returns table (clamped_to text, system boolean, matches boolean, id uuid, delta_found boolean,
               balance bigint, busy boolean, dedupe_taken boolean)
language plpgsql volatile set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if not matches then
        return next;
        return;
    end if;
    perform pg_advisory_xact_lock(p_lane_lock, hashtext(p_lane_key));
    id := fairqueue.new_job_id();
    delta_found := p_delta_of is null or exists (
        select 1 from fairqueue.all_jobs j
         where j.id = p_delta_of and j.tenant_id is not distinct from p_tenant_id
           and j.lane = p_lane);
    if p_charge > 0 then
        perform pg_advisory_xact_lock(p_credit_lock, hashtext(p_credit_key));
        balance := fairqueue.credit_balance(p_tenant_id);
    end if;
    busy := p_delta_of is null and exists (
        select 1 from fairqueue.jobs j
         where j.tenant_id is not distinct from p_tenant_id and j.lane = p_lane
           and j.delta_of is null and j.status in ('queued', 'pending', 'running'));
    dedupe_taken := p_dedupe_key is not null and exists (
        select 1 from fairqueue.jobs j
         where coalesce(j.tenant_id, '') = coalesce(p_tenant_id, '')
           and j.tenant_id is not distinct from p_tenant_id
           and j.dedupe_key = p_dedupe_key
           and j.status in ('queued', 'pending', 'running'));
    return next;
end $$;

alter function fairqueue.admission_checks(text, text, integer, text, integer, text, bigint, uuid, text)
    owner to fairqueue_owner;
revoke all on function fairqueue.admission_checks(text, text, integer, text, integer, text, bigint, uuid, text)
    from public, fairqueue_app;
grant execute on function fairqueue.admission_checks(text, text, integer, text, integer, text, bigint, uuid, text)
    to fairqueue_app;

-- Still under the lane's lock: the job, its debit when it costs credits, and its place in the
-- lane (1 holds it, n waits behind n - 1 first-pass jobs; a delta is always 1). No row when an
-- open job of the tenant took the dedupe key since the checks (a plain enqueue racing).
-- created_at is read now, after the lock was granted, so the lane's order is admission order.
-- Only inside the caller's clamp, only queued or pending, never a negative cost, and a delta
-- only of a job in the lane: nothing else of the checks is the caller's to skip. p_fair_cost
-- is the job's cost in the fair order (enqueue's cost, Stage(fair_by="cost")), not its credits.
create or replace function fairqueue.admission_insert(
    p_id uuid, p_type text, p_payload jsonb, p_tenant_id text, p_group_id text,
    p_dedupe_key text, p_max_attempts integer, p_lane text, p_delta_of uuid, p_cost bigint,
    p_upstream_id text, p_status text, p_fair_cost integer default 1)
returns table (status text, place bigint)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
declare
    v_created_at timestamptz;
begin
    perform fairqueue.door_argument(coalesce(fairqueue.within_clamp(p_tenant_id), false),
        'admission_insert: a job is admitted only for the tenant the transaction is clamped to');
    perform fairqueue.door_argument(p_status in ('queued', 'pending') and p_cost >= 0,
        format('admission_insert: a job comes in queued or pending at a cost of 0 or more, got %s'
               ' at %s', p_status, p_cost));
    perform fairqueue.door_costs('admission_insert', array[p_fair_cost]);
    perform fairqueue.door_argument(p_delta_of is null or exists (
            select 1 from fairqueue.all_jobs d
             where d.id = p_delta_of and d.tenant_id is not distinct from p_tenant_id
               and d.lane = p_lane),
        format('admission_insert: no job %s in this lane', p_delta_of));
    insert into fairqueue.jobs as j (id, type, payload, tenant_id, group_id, dedupe_key,
                                     max_attempts, lane, delta_of, credit_cost, upstream_id,
                                     status, created_at, cost)
    values (p_id, p_type, p_payload, p_tenant_id, p_group_id, p_dedupe_key, p_max_attempts,
            p_lane, p_delta_of, p_cost, p_upstream_id, p_status, clock_timestamp(),
            p_fair_cost)
    on conflict (coalesce(tenant_id, ''), dedupe_key)
       where dedupe_key is not null and status in ('queued', 'pending', 'running')
       do nothing
    returning j.status, j.created_at into status, v_created_at;
    if not found then
        return;
    end if;
    if p_cost > 0 then
        insert into fairqueue.credits (tenant_id, job_id, kind, amount)
        values (p_tenant_id, p_id, 'debit', -p_cost);
    end if;
    place := case when p_delta_of is not null then 1
                  else fairqueue.lane_place(p_tenant_id, p_lane, v_created_at, p_id) end;
    return next;
end $$;

alter function fairqueue.admission_insert(uuid, text, jsonb, text, text, text, integer, text, uuid, bigint, text, text, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.admission_insert(uuid, text, jsonb, text, text, text, integer, text, uuid, bigint, text, text, integer)
    from public, fairqueue_app;
grant execute on function fairqueue.admission_insert(uuid, text, jsonb, text, text, text, integer, text, uuid, bigint, text, text, integer)
    to fairqueue_app;

-- Both steps as one statement, for a stage with no upstream service: the checks, and when they
-- all pass (the clamp is the tenant's, the delta's job is in the lane, the balance pays, the
-- dedupe key is free) the insert. status is NULL when a check refused, or when the dedupe key
-- was taken by a plain enqueue between the two.
create or replace function fairqueue.admission(
    p_tenant_id text, p_lane text, p_lane_lock integer, p_lane_key text,
    p_credit_lock integer, p_credit_key text, p_charge bigint, p_delta_of uuid,
    p_dedupe_key text, p_type text, p_payload jsonb, p_group_id text, p_max_attempts integer,
    p_fair_cost integer default 1)
returns table (clamped_to text, system boolean, matches boolean, id uuid, delta_found boolean,
               balance bigint, busy boolean, dedupe_taken boolean, status text, place bigint)
language plpgsql volatile set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    select c.clamped_to, c.system, c.matches, c.id, c.delta_found, c.balance, c.busy,
           c.dedupe_taken
      into clamped_to, system, matches, id, delta_found, balance, busy, dedupe_taken
      from fairqueue.admission_checks(p_tenant_id, p_lane, p_lane_lock, p_lane_key,
                                      p_credit_lock, p_credit_key, p_charge, p_delta_of,
                                      p_dedupe_key) c;
    if matches and delta_found and (p_charge = 0 or balance >= p_charge)
       and not dedupe_taken then
        select i.status, i.place into status, place
          from fairqueue.admission_insert(id, p_type, p_payload, p_tenant_id, p_group_id,
                                          p_dedupe_key, p_max_attempts, p_lane, p_delta_of,
                                          p_charge, null,
                                          case when busy then 'queued' else 'pending' end,
                                          p_fair_cost) i;
    end if;
    return next;
end $$;

alter function fairqueue.admission(text, text, integer, text, integer, text, bigint, uuid, text, text, jsonb, text, integer, integer)
    owner to fairqueue_owner;
revoke all on function fairqueue.admission(text, text, integer, text, integer, text, bigint, uuid, text, text, jsonb, text, integer, integer)
    from public, fairqueue_app;
grant execute on function fairqueue.admission(text, text, integer, text, integer, text, bigint, uuid, text, text, jsonb, text, integer, integer)
    to fairqueue_app;

-- Under the caller's clamp: the place in its lane of an open first-pass job, the number of
-- open first-pass jobs of the lane admitted up to it (1 holds the lane). Admission reports it,
-- and the API shows it of a waiting job (the query lane_job).
create or replace function fairqueue.lane_place(
    p_tenant_id text, p_lane text, p_created_at timestamptz, p_id uuid) returns bigint
language plpgsql stable set search_path = pg_catalog, pg_temp
as $$
begin
    return (select count(*)
              from fairqueue.jobs o
             where o.tenant_id is not distinct from p_tenant_id and o.lane = p_lane
               and o.delta_of is null and o.status in ('queued', 'pending', 'running')
               and (o.created_at, o.id) <= (p_created_at, p_id));
end $$;

alter function fairqueue.lane_place(text, text, timestamptz, uuid) owner to fairqueue_owner;
revoke all on function fairqueue.lane_place(text, text, timestamptz, uuid) from public, fairqueue_app;
grant execute on function fairqueue.lane_place(text, text, timestamptz, uuid) to fairqueue_app;

-- A tenant's credit balance, under the caller's clamp: the sum of its ledger. Grants keep a
-- balance under fairqueue.lanes.MAX_BALANCE; a ledger written before they did may sum past what
-- a bigint holds (sum over bigint is a numeric), and is read as the bigint nearest its sum
-- rather than making every read of the balance, and every admission of the tenant, fail.
create or replace function fairqueue.credit_balance(p_tenant_id text) returns bigint
language sql stable
as $$
select least(greatest(coalesce(sum(c.amount), 0), -9223372036854775808), 9223372036854775807)::bigint
  from fairqueue.credits c
 where c.tenant_id is not distinct from p_tenant_id
$$;

alter function fairqueue.credit_balance(text) owner to fairqueue_owner;
revoke all on function fairqueue.credit_balance(text) from public, fairqueue_app;
grant execute on function fairqueue.credit_balance(text) to fairqueue_app;
