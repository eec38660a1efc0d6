-- The claim's plans lean on the statistics of fairqueue.jobs: right after a bulk enqueue, before
-- autovacuum has analyzed the table, the planner takes it for nearly empty and walks the groups
-- through the wrong index, sorting the whole backlog at every step (a claim of 100 over 50,000
-- new jobs in 1,000 groups took 33 s instead of 0.14 s). Called before each claim: analyzes the
-- table when it has grown past twice the pages it had at its last analyze (and at least 128),
-- or when more rows changed since then than it held (and at least 5,000), one caller at a time;
-- the others go on with the statistics there are. Not while a vacuum of the table is under way
-- (its lock is held): an ANALYZE would cancel an autovacuum, and a lumpy queue, which enqueues
-- in bulk again and again, then never has its dead rows vacuumed (the bench's churn of a million
-- jobs saw every autovacuum of jobs cancelled). Whether it analyzed.
create or replace function fairqueue.analyze_when_stale() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    pages_now bigint;
    pages_then integer;
    changed bigint;
    counted real;
begin
    -- The table's size now is known at once; the change counter only once the sessions that
    -- wrote report their statistics (up to a second or more after their commit). The counter
    -- itself, not pg_stat_all_tables: that view groups every index of the table.
    select pg_relation_size(c.oid) / current_setting('block_size')::integer, c.relpages,
           pg_stat_get_mod_since_analyze(c.oid), c.reltuples
      into pages_now, pages_then, changed, counted
      from pg_class c
     where c.oid = 'fairqueue.jobs'::regclass;
    if not (pages_now >= 128 and pages_now > 2 * greatest(pages_then, 0))
       and not (changed >= 5000 and changed > greatest(counted, 0)) then
        return false;
    end if;
    if not pg_try_advisory_xact_lock(hashtextextended('fairqueue.analyze', 0)) then
        return false;
    end if;
    if exists (select 1
                 from pg_locks l
                where l.locktype = 'relation' and l.database = (select oid from pg_database
                                                                 where datname = current_database())
                  and l.relation = 'fairqueue.jobs'::regclass
                  and l.mode = 'ShareUpdateExclusiveLock' and l.granted) then
        return false;
    end if;
    analyze fairqueue.jobs;
    return true;
end $$;
alter function fairqueue.analyze_when_stale() owner to fairqueue_owner;
revoke all on function fairqueue.analyze_when_stale() from public, fairqueue_app;
grant execute on function fairqueue.analyze_when_stale() to fairqueue_app;
