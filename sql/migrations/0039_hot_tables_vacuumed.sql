-- The two tables every claim and completion writes are vacuumed whenever autovacuum's pass finds
-- ten thousand dead row versions in `jobs` or a thousand in `served`, whatever their size, and
-- without the cost-based pauses: a queue's churn leaves row versions far faster than the
-- server's defaults (a fifth of the table, throttled) reclaim them, and both tables are small
-- when vacuumed often. The server's own autovacuum_naptime still bounds how often that is.
alter table fairqueue.jobs set (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);
alter table fairqueue.served set (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0
);
