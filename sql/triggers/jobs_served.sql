-- The served counts follow every change to jobs: statement-level triggers that add what became
-- served in the last day and take away what stopped being so, per type and group key. Rows are
-- written in key order, so overlapping claims never deadlock on them. They run as the owner
-- (security definer): only these triggers write served, whoever changed jobs.
create or replace function fairqueue.jobs_served_insert() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from new_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, count(*)
      from new_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;
alter function fairqueue.jobs_served_insert() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_insert() from public, fairqueue_app;

create or replace function fairqueue.jobs_served_update() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.served_near_edge(
        least((select min(served_at) from old_rows), (select min(served_at) from new_rows)));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, sum(d)
      from (select type, group_key, -1 as d, served_at from old_rows
            union all
            select type, group_key, 1, served_at from new_rows) as changed
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
    having sum(d) <> 0
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;
alter function fairqueue.jobs_served_update() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_update() from public, fairqueue_app;

create or replace function fairqueue.jobs_served_delete() returns trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp
as $$
begin
    perform fairqueue.served_near_edge((select min(served_at) from old_rows));
    insert into fairqueue.served as s (type, group_key, n)
    select type, group_key, -count(*)
      from old_rows
     where served_at > (select watermark from fairqueue.served_watermark)
     group by 1, 2
     order by 1, 2
    on conflict (type, group_key) do update set n = s.n + excluded.n;
    return null;
end $$;
alter function fairqueue.jobs_served_delete() owner to fairqueue_owner;
revoke all on function fairqueue.jobs_served_delete() from public, fairqueue_app;


create or replace trigger jobs_served_insert after insert on fairqueue.jobs
    referencing new table as new_rows
    for each statement execute function fairqueue.jobs_served_insert();
create or replace trigger jobs_served_update after update on fairqueue.jobs
    referencing old table as old_rows new table as new_rows
    for each statement execute function fairqueue.jobs_served_update();
create or replace trigger jobs_served_delete after delete on fairqueue.jobs
    referencing old table as old_rows
    for each statement execute function fairqueue.jobs_served_delete();
