-- The claim reads groups, not the whole backlog.
--
-- The first claim ranked every claimable row of a type with a window function: its cost grew
-- with the backlog (100k pending rows cost a sort of 100k rows per batch). This one walks the
-- groups that have pending work (a skip scan of the index below, about one probe per group), ranks
-- the groups by plan priority and served count on their oldest due job, and reads rows only
-- from the best groups, a bounded number from each. Its cost grows with the number of groups,
-- never with the depth of the backlog. Order is unchanged: plan priority, then least-served
-- group (served count plus the job's place in its group), then oldest.

create index jobs_group_queue_idx on fairqueue.jobs (type, (coalesce(group_id, '')), created_at, id)
    where status = 'pending';
