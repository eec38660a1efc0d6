-- requires: functions/group_key.sql
-- A group is its tenant's: a tenant and a group id together name it everywhere.
--
-- Groups were keyed by the group id alone: tenant A pausing its group "inbox" paused tenant B's
-- "inbox" too, the two shared one served count, and every job without a group, whatever its
-- tenant, fell into one group shared by all, so tenants that never name groups got no fairness
-- between them. Now every job carries group_key, made from its tenant and its group id by one
-- function (fairqueue.group_key); a job with no group is in its tenant's default group, and
-- jobs with no tenant are one group of their own. groups rows carry the same key. The served
-- counts, the claim's walk over groups, pause and resume all go by it. The served counts are
-- recounted from the rows under the new keys; the claim's order is otherwise unchanged.

alter table fairqueue.jobs
    add column group_key text not null
        generated always as (fairqueue.group_key(tenant_id, group_id)) stored;
drop index fairqueue.jobs_group_queue_idx;
create index jobs_group_queue_idx on fairqueue.jobs (type, group_key, created_at, id)
    where status = 'pending';

alter table fairqueue.groups
    add column key text not null generated always as (fairqueue.group_key(tenant_id, id)) stored;
alter table fairqueue.groups drop constraint groups_pkey;
alter table fairqueue.groups add constraint groups_pkey primary key (key);

-- Recounted under the new keys; the jobs table is locked by the column added above, so no claim
-- or completion runs in between.
truncate fairqueue.served;
insert into fairqueue.served (type, group_key, n)
select type, group_key, count(*)
  from fairqueue.jobs
 where served_at > (select watermark from fairqueue.served_watermark)
 group by 1, 2;
