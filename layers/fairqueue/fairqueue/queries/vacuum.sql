-- name: tables_to_vacuum
-- The hot tables this role may vacuum (MAINTAIN: PostgreSQL 17 and later, granted by
-- sql/policies/vacuum.sql) that hold at least as many dead row versions as their own autovacuum
-- threshold (sql/migrations/0039_hot_tables_vacuumed.sql). The privilege is asked about only where
-- the server knows it: older servers reject its name.
select n.nspname || '.' || c.relname as table_name, t.n_dead_tup as dead
  from pg_stat_user_tables t
  join pg_class c on c.oid = t.relid
  join pg_namespace n on n.oid = c.relnamespace
 where t.relid in ('fairqueue.jobs'::regclass, 'fairqueue.served'::regclass)
   and case when current_setting('server_version_num')::integer >= 170000
            then has_table_privilege(t.relid, 'MAINTAIN')
            else false end
   and t.n_dead_tup >= coalesce(
           (select o.option_value::bigint
              from pg_options_to_table(c.reloptions) o
             where o.option_name = 'autovacuum_vacuum_threshold'),
           current_setting('autovacuum_vacuum_threshold')::bigint)
 order by 1;

-- name: vacuum_jobs
-- A table another vacuum holds (autovacuum's, say) is skipped with a warning, not waited for.
vacuum (skip_locked) fairqueue.jobs;

-- name: vacuum_served
vacuum (skip_locked) fairqueue.served;
