-- Quotas are written through doors only (sql/functions/quotas.sql); reads are direct.

-- name: define_quota
select name
  from fairqueue.define_quota(%(name)s, %(capacity)s, %(reserve)s, %(period_s)s);

-- name: reset_due_quota
select fairqueue.reset_due_quota(%(name)s);

-- name: spend_quota
select remaining from fairqueue.spend_quota(%(name)s, %(units)s);

-- name: read_quota
select name, capacity, remaining, reserve, resets_at from fairqueue.quotas where name = %(name)s;
