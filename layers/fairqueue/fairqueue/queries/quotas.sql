-- name: define_quota
insert into fairqueue.quotas (name, capacity, remaining, reserve, period, resets_at)
values (%(name)s, %(capacity)s, %(capacity)s, %(reserve)s, %(period_s)s * interval '1 second',
        now() + %(period_s)s * interval '1 second')
on conflict (name) do update
   set capacity = excluded.capacity, reserve = excluded.reserve, period = excluded.period
returning name;

-- name: reset_due_quota
-- A budget whose reset time has passed starts its next period full.
update fairqueue.quotas
   set remaining = capacity,
       resets_at = resets_at
                   + period * (floor(extract(epoch from now() - resets_at)
                                     / extract(epoch from period)) + 1)
 where name = %(name)s and resets_at <= now();

-- name: spend_quota
-- Spends only what leaves the reserve untouched.
update fairqueue.quotas
   set remaining = remaining - %(units)s
 where name = %(name)s and remaining - %(units)s >= reserve
returning remaining;

-- name: read_quota
select name, capacity, remaining, reserve, resets_at from fairqueue.quotas where name = %(name)s;
