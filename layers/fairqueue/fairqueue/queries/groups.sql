-- name: group_known
-- Under the tenant's clamp: whether the group has a row (an earlier pause or resume) or any job
-- has ever had it (the served counts keep a row per type and group from its first job on).
select exists (select 1 from fairqueue.groups g
                where g.key = fairqueue.group_key(%(tenant_id)s, %(id)s))
    or exists (select 1 from fairqueue.served s
                where s.group_key = fairqueue.group_key(%(tenant_id)s, %(id)s)) as known;
