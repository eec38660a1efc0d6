-- What `fairqueue top` shows of the fair order, across tenants: the groups served most in the
-- last day, and the groups with due work waiting that were served least. Keys and counts only.
create or replace function fairqueue.served_groups_unchecked(p_limit integer)
returns table (type text, group_key text, served bigint, waiting boolean, most boolean,
               plan text, running bigint)
language sql stable set search_path = pg_catalog, pg_temp
as $$
(select s.type, s.group_key, s.n, s.head_id is not null, true, s.plan, 0::bigint
   from fairqueue.served s
  where s.n > 0
  order by s.n desc, s.type, s.group_key
  limit p_limit)
union all
-- The least served with work waiting, each with its tenant's plan and running jobs of the type
-- (through jobs_lease_idx: a running job holds a lease), so that a tenant at its plan's cap
-- (Plan.max_running) can be told.
(select s.type, s.group_key, s.n, true, false, s.plan,
        (select count(*) from fairqueue.jobs j
          where j.type = s.type and j.tenant_id = s.tenant_id and j.status = 'running'
            and j.lease_until is not null)
   from fairqueue.served s
  where s.head_id is not null and not s.paused
  order by s.n, s.head_created_at, s.type, s.group_key
  limit p_limit)
$$;

alter function fairqueue.served_groups_unchecked(integer) owner to fairqueue_owner;
revoke all on function fairqueue.served_groups_unchecked(integer) from public, fairqueue_app;

-- The door: checks the arguments, then runs served_groups_unchecked as the owner.
create or replace function fairqueue.served_groups(p_limit integer)
returns table (type text, group_key text, served bigint, waiting boolean, most boolean,
               plan text, running bigint)
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_limit between 1 and 100,
    format('served_groups: limit must be from 1 to 100, got %s', p_limit));
select * from fairqueue.served_groups_unchecked(p_limit);
$$;

alter function fairqueue.served_groups(integer) owner to fairqueue_owner;
revoke all on function fairqueue.served_groups(integer) from public, fairqueue_app;
grant execute on function fairqueue.served_groups(integer) to fairqueue_app;
