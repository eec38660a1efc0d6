-- The claim's plans lean on the statistics of fairqueue.jobs and of the tables it reads beside
-- it (the groups' standings, the groups, the tenants' standings): right after a bulk enqueue, before
-- autovacuum has analyzed the table, the planner takes it for nearly empty and walks the groups
-- through the wrong index, sorting the whole backlog at every step (a claim of 100 over 50,000
-- new jobs in 1,000 groups took 33 s instead of 0.14 s; with the standings last analyzed when
-- they held a few groups, a claim over 10,000 groups took 0.38 s instead of 0.03 s). Called
-- before each claim: analyzes each table when it has grown past twice the pages it had at its
-- last analyze (and at least 128), or past twice the rows (and by at least 5,000), one caller
-- at a time; the others go on with the statistics there are. Growth, not change: a drain
-- rewrites every row it claims and completes without changing what the plans need to know,
-- and counting those writes put an ANALYZE of the whole backlog into some claim every time the
-- drain had rewritten as many rows as the table held (docs/design/claim.md). Not while a vacuum of
-- the table is under way (its lock is held): an ANALYZE would cancel an autovacuum, and a lumpy
-- queue, which enqueues in bulk again and again, then never has its dead rows vacuumed (the
-- bench's churn of a million jobs saw every autovacuum of jobs cancelled). Whether it analyzed.
create or replace function fairqueue.analyze_if_stale(p_table regclass) returns boolean
language plpgsql set search_path = pg_catalog, pg_temp
as $$
declare
    pages_now bigint;
    pages_then integer;
    live bigint;
    counted real;
begin
    -- The table's size now is known at once; its live rows only once the sessions that wrote
    -- report their statistics (up to a second or more after their commit). The counter itself,
    -- not pg_stat_all_tables: that view groups every index of the table.
    select pg_relation_size(c.oid) / current_setting('block_size')::integer, c.relpages,
           pg_stat_get_live_tuples(c.oid), c.reltuples
      into pages_now, pages_then, live, counted
      from pg_class c
     where c.oid = p_table;
    if not (pages_now >= 128 and pages_now > 2 * greatest(pages_then, 0))
       and not (live >= greatest(counted, 0) + 5000 and live > 2 * greatest(counted, 0)) then
        return false;
    end if;
    if not pg_try_advisory_xact_lock(hashtextextended('fairqueue.analyze', 0)) then
        return false;
    end if;
    if exists (select 1
                 from pg_locks l
                where l.locktype = 'relation' and l.database = (select oid from pg_database
                                                                 where datname = current_database())
                  and l.relation = p_table
                  and l.mode = 'ShareUpdateExclusiveLock' and l.granted) then
        return false;
    end if;
    execute format('analyze %s', p_table);
    return true;
end $$;
alter function fairqueue.analyze_if_stale(regclass) owner to fairqueue_owner;
revoke all on function fairqueue.analyze_if_stale(regclass) from public, fairqueue_app;

-- The door: every table the claim reads, each when it is stale; whether it analyzed any.
create or replace function fairqueue.analyze_when_stale() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    analyzed boolean := false;
    stale regclass;
begin
    foreach stale in array array['fairqueue.jobs', 'fairqueue.served', 'fairqueue.groups',
                                 'fairqueue.tenant_standings']::regclass[] loop
        analyzed := fairqueue.analyze_if_stale(stale) or analyzed;
    end loop;
    return analyzed;
end $$;
alter function fairqueue.analyze_when_stale() owner to fairqueue_owner;
revoke all on function fairqueue.analyze_when_stale() from public, fairqueue_app;
grant execute on function fairqueue.analyze_when_stale() to fairqueue_app;
