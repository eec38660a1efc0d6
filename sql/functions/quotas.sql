-- Quotas are money: what a rationed budget has left decides what may run. A quota is defined,
-- reset and spent only through these three doors, which check their arguments; the application
-- role may read quotas and change none, so it cannot refill a spent one. Spending is one
-- statement that never dips into the reserve.

-- The bounds of a quota's definition, checked for the door named `p_door` (both doors that
-- define quotas take the same arguments and refuse the same ones).
create or replace function fairqueue.quota_definition_checked(
    p_door text,
    p_name text,
    p_capacity bigint,
    p_reserve bigint,
    p_period_s double precision
) returns void
language plpgsql set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.door_argument(p_name <> '' and length(p_name) <= 200,
        p_door || ': the name must be 1 to 200 characters');
    -- At most 10^15 units, as fairqueue.quotas.MAX_UNITS says: what a balance may hold.
    perform fairqueue.door_argument(
        p_capacity between 0 and 1000000000000000 and p_reserve between 0 and p_capacity,
        format('%s: need 0 <= reserve <= capacity <= 10^15, got %s and %s', p_door, p_reserve,
               p_capacity));
    perform fairqueue.door_argument(p_period_s > 0 and p_period_s <= 366 * 86400,
        format('%s: the period must be over 0 and at most 366 days, got %s s', p_door,
               p_period_s));
end $$;
alter function fairqueue.quota_definition_checked(text, text, bigint, bigint,
    double precision) owner to fairqueue_owner;
revoke all on function fairqueue.quota_definition_checked(text, text, bigint, bigint,
    double precision) from public, fairqueue_app;

-- Defines a quota, or changes an existing one's capacity, reserve and period.
create or replace function fairqueue.define_quota(
    p_name text,
    p_capacity bigint,
    p_reserve bigint,
    p_period_s double precision
) returns table (name text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.quota_definition_checked('define_quota', p_name, p_capacity, p_reserve,
    p_period_s);
insert into fairqueue.quotas as q (name, capacity, remaining, reserve, period, resets_at)
values (p_name, p_capacity, p_capacity, p_reserve, p_period_s * interval '1 second',
        now() + p_period_s * interval '1 second')
on conflict on constraint quotas_pkey do update
   set capacity = excluded.capacity, reserve = excluded.reserve, period = excluded.period
returning q.name;
$$;

alter function fairqueue.define_quota(text, bigint, bigint,
    double precision) owner to fairqueue_owner;
revoke all on function fairqueue.define_quota(text, bigint, bigint, double precision) from public,
    fairqueue_app;
grant execute on function fairqueue.define_quota(text, bigint, bigint,
    double precision) to fairqueue_app;

-- A budget whose reset time has passed starts its next period full.
create or replace function fairqueue.reset_due_quota(p_name text) returns void
language sql security definer set search_path = pg_catalog, pg_temp
as $$
update fairqueue.quotas
   set remaining = capacity,
       resets_at = resets_at
                   + period * (floor(extract(epoch from now() - resets_at)
                                     / extract(epoch from period)) + 1)
 where name = p_name and resets_at <= now();
$$;

alter function fairqueue.reset_due_quota(text) owner to fairqueue_owner;
revoke all on function fairqueue.reset_due_quota(text) from public, fairqueue_app;
grant execute on function fairqueue.reset_due_quota(text) to fairqueue_app;

-- Resets the quota if its period has passed, then spends only what leaves the reserve
-- untouched; what remains, or no row when it cannot pay.
create or replace function fairqueue.spend_quota(p_name text, p_units bigint) returns table (
    remaining bigint)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_units >= 1,
    format('spend_quota: spend at least one unit, got %s', p_units));
select fairqueue.reset_due_quota(p_name);
update fairqueue.quotas as q
   set remaining = q.remaining - p_units
 where q.name = p_name and q.remaining - p_units >= q.reserve
returning q.remaining;
$$;

alter function fairqueue.spend_quota(text, bigint) owner to fairqueue_owner;
revoke all on function fairqueue.spend_quota(text, bigint) from public, fairqueue_app;
grant execute on function fairqueue.spend_quota(text, bigint) to fairqueue_app;

-- Defines a quota only where none of its name exists: what a stage list that brings its own
-- quota (the example's search_api) does wherever it runs, never overwriting the capacity,
-- reserve or period an operator gave it. The same bounds as define_quota. The
-- name when it was defined now; no row when the quota already existed.
create or replace function fairqueue.define_quota_if_absent(
    p_name text,
    p_capacity bigint,
    p_reserve bigint,
    p_period_s double precision
) returns table (name text)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.quota_definition_checked('define_quota_if_absent', p_name, p_capacity, p_reserve,
    p_period_s);
insert into fairqueue.quotas as q (name, capacity, remaining, reserve, period, resets_at)
values (p_name, p_capacity, p_capacity, p_reserve, p_period_s * interval '1 second',
        now() + p_period_s * interval '1 second')
on conflict on constraint quotas_pkey do nothing
returning q.name;
$$;

alter function fairqueue.define_quota_if_absent(text, bigint, bigint,
    double precision) owner to fairqueue_owner;
revoke all on function fairqueue.define_quota_if_absent(text, bigint, bigint, double precision)
    from public, fairqueue_app;
grant execute on function fairqueue.define_quota_if_absent(text, bigint, bigint,
    double precision) to fairqueue_app;
