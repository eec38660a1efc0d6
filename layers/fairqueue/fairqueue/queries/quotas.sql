-- Quotas are written through doors only (sql/functions/quotas.sql); reads are direct.

-- name: define_quota
select name
  from fairqueue.define_quota(%(name)s, %(capacity)s, %(reserve)s, %(period_s)s);

-- name: define_quota_if_absent
-- A row when the quota was defined now, none when one of that name already existed.
select name
  from fairqueue.define_quota_if_absent(%(name)s, %(capacity)s, %(reserve)s, %(period_s)s);

-- name: reset_due_quota
select fairqueue.reset_due_quota(%(name)s);

-- name: spend_quota
select remaining from fairqueue.spend_quota(%(name)s, %(units)s);

-- name: read_quota
select name, capacity, remaining, reserve, resets_at from fairqueue.quotas where name = %(name)s;

-- name: reset_due_quotas
-- Every quota whose reset time has passed, through the one-quota door: one statement, each row
-- reset under its own lock (a spend between the scan and the reset is not reset twice: the
-- door's update checks the reset time again).
select fairqueue.reset_due_quota(name) from fairqueue.quotas where resets_at <= now();

-- name: list_quotas
select name, capacity, remaining, reserve, resets_at from fairqueue.quotas order by name;
