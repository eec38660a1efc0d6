-- Schedules (docs/design/schedules.md): the doors that make, pause, resume and remove a tenant's
-- schedules, each under the caller's clamp as enqueue is (clamp_unless_clamped), and the two the
-- sweep uses across tenants, which hand back ids, rules and times, never a payload. The ticks
-- themselves are worked out in Python (a cron library); the database keeps what was made once.

-- A tick's dedupe key: its schedule and its time, to the second in UTC. The one spelling of it;
-- schedule_of_tick_key reads it back.
create or replace function fairqueue.schedule_tick_key(p_schedule_id uuid, p_tick_at timestamptz)
returns text
language sql immutable set search_path = pg_catalog, pg_temp
as $$
select 'schedule:' || p_schedule_id::text || '@'
       || to_char(p_tick_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;
alter function fairqueue.schedule_tick_key(uuid, timestamptz) owner to fairqueue_owner;
revoke all on function fairqueue.schedule_tick_key(uuid, timestamptz) from public, fairqueue_app;
grant execute on function fairqueue.schedule_tick_key(uuid, timestamptz) to fairqueue_app;

-- The schedule a dedupe key names, or NULL when the key is not a tick's.
create or replace function fairqueue.schedule_of_tick_key(p_key text) returns uuid
language sql immutable set search_path = pg_catalog, pg_temp
as $$
select case when p_key ~ '^schedule:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}@'
            then substr(p_key, 10, 36)::uuid end
$$;
alter function fairqueue.schedule_of_tick_key(text) owner to fairqueue_owner;
revoke all on function fairqueue.schedule_of_tick_key(text) from public, fairqueue_app;
grant execute on function fairqueue.schedule_of_tick_key(text) to fairqueue_app;

-- A new schedule of the tenant, checked in Python first (fairqueue.schedules.add_schedule); id is
-- NULL when the tenant has one of that name, or when the clamp is another tenant's.
create or replace function fairqueue.schedule_add(
    p_tenant_id text, p_name text, p_job_type text, p_cron text, p_every_s integer,
    p_timezone text, p_payload jsonb, p_group_id text, p_max_attempts integer, p_catch_up text,
    p_next_tick_at timestamptz)
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    perform fairqueue.door_argument(p_catch_up in ('none', 'one', 'all'),
        format('schedule_add: catch_up must be none, one or all, got %L', p_catch_up));
    perform fairqueue.door_argument((p_cron is null) <> (p_every_s is null),
        'schedule_add: exactly one of cron and every_s');
    perform fairqueue.door_argument(p_every_s is null or p_every_s >= 60,
        format('schedule_add: every_s must be 60 or more, got %s', p_every_s));
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if matches then
        insert into fairqueue.schedules
               (tenant_id, name, job_type, cron, every_s, timezone, payload, group_id,
                max_attempts, catch_up, next_tick_at)
        values (p_tenant_id, p_name, p_job_type, p_cron, p_every_s, p_timezone, p_payload,
                p_group_id, p_max_attempts, p_catch_up, p_next_tick_at)
        on conflict (coalesce(tenant_id, ''), name) do nothing
        returning fairqueue.schedules.id into id;
    end if;
    return next;
end $$;
alter function fairqueue.schedule_add(text, text, text, text, integer, text, jsonb, text, integer,
    text, timestamptz) owner to fairqueue_owner;
revoke all on function fairqueue.schedule_add(text, text, text, text, integer, text, jsonb, text,
    integer, text, timestamptz) from public, fairqueue_app;
grant execute on function fairqueue.schedule_add(text, text, text, text, integer, text, jsonb,
    text, integer, text, timestamptz) to fairqueue_app;

-- Pause (p_paused) or resume a schedule of the tenant; a resumed one owes its next tick at
-- p_next_tick_at (the first after now: what fell due while it was paused is not made). id is
-- NULL when the tenant has no schedule of that name, or the clamp is another tenant's.
create or replace function fairqueue.schedule_set_paused(
    p_tenant_id text, p_name text, p_paused boolean, p_next_tick_at timestamptz)
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    perform fairqueue.door_argument(p_paused or p_next_tick_at is not null,
        'schedule_set_paused: a resumed schedule needs its next tick');
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if matches then
        update fairqueue.schedules s
           set paused = p_paused,
               next_tick_at = case when p_paused then s.next_tick_at else p_next_tick_at end
         where coalesce(s.tenant_id, '') = coalesce(p_tenant_id, '') and s.name = p_name
           and fairqueue.within_clamp(s.tenant_id)
        returning s.id into id;
    end if;
    return next;
end $$;
alter function fairqueue.schedule_set_paused(text, text, boolean, timestamptz)
    owner to fairqueue_owner;
revoke all on function fairqueue.schedule_set_paused(text, text, boolean, timestamptz)
    from public, fairqueue_app;
grant execute on function fairqueue.schedule_set_paused(text, text, boolean, timestamptz)
    to fairqueue_app;

-- Remove a schedule of the tenant: no tick after it; the jobs it made stay. id as above.
create or replace function fairqueue.schedule_remove(p_tenant_id text, p_name text)
returns table (clamped_to text, system boolean, matches boolean, id uuid)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
#variable_conflict use_column
begin
    select c.tenant_id, c.system, c.matches into clamped_to, system, matches
      from fairqueue.clamp_unless_clamped(p_tenant_id) c;
    if matches then
        delete from fairqueue.schedules s
         where coalesce(s.tenant_id, '') = coalesce(p_tenant_id, '') and s.name = p_name
           and fairqueue.within_clamp(s.tenant_id)
        returning s.id into id;
    end if;
    return next;
end $$;
alter function fairqueue.schedule_remove(text, text) owner to fairqueue_owner;
revoke all on function fairqueue.schedule_remove(text, text) from public, fairqueue_app;
grant execute on function fairqueue.schedule_remove(text, text) to fairqueue_app;

-- The schedules an operator asks for across tenants (`fairqueue schedules list`), by tenant and
-- name: ids and tenants only; each is read again under its tenant's clamp.
create or replace function fairqueue.find_schedules(p_tenant_id text, p_name text,
    p_limit integer)
returns table (id uuid, tenant_id text)
language plpgsql stable security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_limit between 1 and 10000,
        format('find_schedules: limit must be from 1 to 10000, got %s', p_limit));
    return query
    select s.id, s.tenant_id
      from fairqueue.schedules s
     where (p_tenant_id is null or s.tenant_id = p_tenant_id)
       and (p_name is null or s.name = p_name)
     order by s.tenant_id nulls first, s.name
     limit p_limit;
end $$;
alter function fairqueue.find_schedules(text, text, integer) owner to fairqueue_owner;
revoke all on function fairqueue.find_schedules(text, text, integer) from public, fairqueue_app;
grant execute on function fairqueue.find_schedules(text, text, integer) to fairqueue_app;

-- The sweep's side of the boundary: a transaction clamped to a tenant may not use these two.
create or replace function fairqueue.door_sweep_only(p_door text) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(fairqueue.current_tenant() is null,
        format('%s: the sweep works for every tenant; this transaction is clamped to one',
               p_door));
end $$;
alter function fairqueue.door_sweep_only(text) owner to fairqueue_owner;
revoke all on function fairqueue.door_sweep_only(text) from public, fairqueue_app;

-- Up to p_limit schedules whose next tick has come, locked for the caller's transaction; rows
-- another sweep holds are skipped, so two sweeps share the due rows instead of waiting. Read by
-- the partial index on next_tick_at: only due rows are touched.
create or replace function fairqueue.schedules_due(p_limit integer)
returns table (id uuid, cron text, every_s integer, timezone text, next_tick_at timestamptz,
               catch_up text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_sweep_only('schedules_due');
    perform fairqueue.door_argument(p_limit between 1 and 10000,
        format('schedules_due: limit must be from 1 to 10000, got %s', p_limit));
    return query
    select s.id, s.cron, s.every_s, s.timezone, s.next_tick_at, s.catch_up
      from fairqueue.schedules s
     where s.next_tick_at <= now() and not s.paused
     order by s.next_tick_at
     limit p_limit
       for update of s skip locked;
end $$;
alter function fairqueue.schedules_due(integer) owner to fairqueue_owner;
revoke all on function fairqueue.schedules_due(integer) from public, fairqueue_app;
grant execute on function fairqueue.schedules_due(integer) to fairqueue_app;

-- What a sweep made of the due schedules it read: schedule k (p_ids) moves from p_was[k] to
-- p_next[k], its last tick p_last[k] (NULL: none made, catch_up none skipped them); each tick
-- (p_tick_ids[i], p_tick_ats[i]) becomes a job of the schedule's type, payload, tenant and
-- group whose dedupe key is the tick's. A schedule whose next tick is no longer p_was (another
-- sweep moved it) or that was paused is left alone, with its ticks: each tick is made once,
-- by the one statement that moves the schedule past it. The jobs made: id, tenant and type.
create or replace function fairqueue.schedule_ticks(
    p_ids uuid[], p_was timestamptz[], p_next timestamptz[], p_last timestamptz[],
    p_tick_ids uuid[], p_tick_ats timestamptz[])
returns table (id uuid, tenant_id text, type text)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
    -- Each due schedule is found by its key: a scan of every schedule, which the planner picks
    -- for a thousand keys of a hundred thousand rows, would make a sweep's cost grow with the
    -- schedules rather than with the due ticks (bench/schedules.py).
    set enable_seqscan = off
as $$
#variable_conflict use_column
declare
    moved uuid[];
begin
    perform fairqueue.door_sweep_only('schedule_ticks');
    perform fairqueue.door_argument(
        cardinality(p_ids) = cardinality(p_was) and cardinality(p_ids) = cardinality(p_next)
        and cardinality(p_ids) = cardinality(p_last)
        and cardinality(p_tick_ids) = cardinality(p_tick_ats),
        'schedule_ticks: the arrays of one kind must be as long as each other');
    with advanced as (
        update fairqueue.schedules s
           set next_tick_at = a.next_at, last_tick_at = coalesce(a.last_at, s.last_tick_at)
          from unnest(p_ids, p_was, p_next, p_last) as a (id, was, next_at, last_at)
         where s.id = a.id and s.next_tick_at = a.was and not s.paused
        returning s.id
    )
    select coalesce(array_agg(advanced.id), '{}') into moved from advanced;
    return query
    with made as (
        insert into fairqueue.jobs (type, payload, tenant_id, group_id, dedupe_key, max_attempts)
        select s.job_type, s.payload, s.tenant_id, s.group_id,
               fairqueue.schedule_tick_key(s.id, t.tick_at), s.max_attempts
          from unnest(p_tick_ids, p_tick_ats) as t (schedule_id, tick_at)
          join fairqueue.schedules s on s.id = t.schedule_id
         where s.id = any(moved)
         -- One order of keys for every sweep, so that two inserts never wait on each other
         -- in opposite orders.
         order by 5
        on conflict (coalesce(tenant_id, ''), dedupe_key)
           where dedupe_key is not null and status in ('queued', 'pending', 'running')
           do nothing
        returning fairqueue.jobs.id, fairqueue.jobs.tenant_id, fairqueue.jobs.type,
                  fairqueue.jobs.dedupe_key
    ), noted as (
        update fairqueue.schedules s
           set last_job_id = made.id
          from made
         -- Each job to its schedule by the primary key, then kept if it is the last tick's.
         where s.id = fairqueue.schedule_of_tick_key(made.dedupe_key)
           and made.dedupe_key = fairqueue.schedule_tick_key(s.id, s.last_tick_at)
    )
    select made.id, made.tenant_id, made.type from made;
end $$;
alter function fairqueue.schedule_ticks(uuid[], timestamptz[], timestamptz[], timestamptz[],
    uuid[], timestamptz[]) owner to fairqueue_owner;
revoke all on function fairqueue.schedule_ticks(uuid[], timestamptz[], timestamptz[],
    timestamptz[], uuid[], timestamptz[]) from public, fairqueue_app;
grant execute on function fairqueue.schedule_ticks(uuid[], timestamptz[], timestamptz[],
    timestamptz[], uuid[], timestamptz[]) to fairqueue_app;

-- The schedules declared in code (FAIRQUEUE_SCHEDULES), kept in step by each sweep: p_declared
-- is a JSON array of them (tenant_id, name, job_type, cron, every_s, timezone, payload,
-- group_id, max_attempts, catch_up, next_tick_at). A new one is made; one whose rule, job or
-- catch_up changed is rewritten and owes its next tick from now (next_tick_at); a declared one
-- no longer in the code is removed. A schedule made at run time (add_schedule) of the same
-- tenant and name is left as it is. How many were made or changed, and how many removed.
create or replace function fairqueue.schedules_declare(p_declared jsonb)
returns table (changed bigint, removed bigint)
language plpgsql volatile security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_sweep_only('schedules_declare');
    return query
    with given as (
        select * from jsonb_to_recordset(p_declared) as d (
            tenant_id text, name text, job_type text, cron text, every_s integer,
            timezone text, payload jsonb, group_id text, max_attempts integer, catch_up text,
            next_tick_at timestamptz)
    ), dropped as (
        delete from fairqueue.schedules s
         where s.declared
           and not exists (select 1 from given g
                            where coalesce(g.tenant_id, '') = coalesce(s.tenant_id, '')
                              and g.name = s.name)
        returning 1
    ), written as (
        insert into fairqueue.schedules as s
               (tenant_id, name, job_type, cron, every_s, timezone, payload, group_id,
                max_attempts, catch_up, next_tick_at, declared)
        select g.tenant_id, g.name, g.job_type, g.cron, g.every_s, g.timezone, g.payload,
               g.group_id, g.max_attempts, g.catch_up, g.next_tick_at, true
          from given g
         order by coalesce(g.tenant_id, ''), g.name
        on conflict (coalesce(tenant_id, ''), name) do update
           set job_type = excluded.job_type, cron = excluded.cron, every_s = excluded.every_s,
               timezone = excluded.timezone, payload = excluded.payload,
               group_id = excluded.group_id, max_attempts = excluded.max_attempts,
               catch_up = excluded.catch_up, next_tick_at = excluded.next_tick_at
         where s.declared
           and (s.job_type, s.cron, s.every_s, s.timezone, s.payload, s.group_id,
                s.max_attempts, s.catch_up)
               is distinct from
               (excluded.job_type, excluded.cron, excluded.every_s, excluded.timezone,
                excluded.payload, excluded.group_id, excluded.max_attempts, excluded.catch_up)
        returning 1
    )
    select (select count(*) from written), (select count(*) from dropped);
end $$;
alter function fairqueue.schedules_declare(jsonb) owner to fairqueue_owner;
revoke all on function fairqueue.schedules_declare(jsonb) from public, fairqueue_app;
grant execute on function fairqueue.schedules_declare(jsonb) to fairqueue_app;
