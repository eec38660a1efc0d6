-- The claim's plans lean on the statistics of fairqueue.jobs: right after a bulk enqueue, before
-- autovacuum has analyzed the table, the planner takes it for nearly empty and walks the groups
-- through the wrong index, sorting the whole backlog at every step (a claim of 100 over 50,000
-- new jobs in 1,000 groups took 33 s instead of 0.14 s). Called before each claim: analyzes the
-- table when more rows changed since its last analyze than it held then (and at least 5,000),
-- one caller at a time; the others go on with the statistics there are. Whether it analyzed.
create or replace function fairqueue.analyze_when_stale() returns boolean
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
declare
    changed bigint;
    counted real;
begin
    select s.n_mod_since_analyze, c.reltuples into changed, counted
      from pg_stat_all_tables s
      join pg_class c on c.oid = s.relid
     where s.relid = 'fairqueue.jobs'::regclass;
    if changed is null or changed < 5000 or changed <= greatest(counted, 0) then
        return false;
    end if;
    if not pg_try_advisory_xact_lock(hashtextextended('fairqueue.analyze', 0)) then
        return false;
    end if;
    analyze fairqueue.jobs;
    return true;
end $$;
alter function fairqueue.analyze_when_stale() owner to fairqueue_owner;
revoke all on function fairqueue.analyze_when_stale() from public, fairqueue_app;
grant execute on function fairqueue.analyze_when_stale() to fairqueue_app;
