-- The application role may vacuum the two tables every claim and completion writes, where the
-- server has the MAINTAIN privilege (PostgreSQL 17 and later): the backstop then vacuums them as
-- soon as they hold as many dead row versions as their autovacuum threshold, instead of waiting
-- for the server's next autovacuum pass (fairqueue.roles.vacuuming). MAINTAIN also allows ANALYZE,
-- REINDEX, CLUSTER and LOCK TABLE on these two tables; the role could already lock them (it
-- updates them), and none of these reads a row, so the tenant boundary is unchanged. Older
-- servers have no such privilege; there the backstop leaves the tables to autovacuum.
do $$
begin
    if current_setting('server_version_num')::integer >= 170000 then
        execute 'grant maintain on table fairqueue.jobs, fairqueue.served to fairqueue_app';
    end if;
end $$;
