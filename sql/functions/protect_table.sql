-- Puts an application table under the same tenant clamp: ENABLE and FORCE row level security
-- and one policy for fairqueue_app on its tenant column, text or uuid. Run it as the table's
-- owner; grant fairqueue_app what it may do to the table yourself.
create or replace function fairqueue.protect_table(
    p_table regclass,
    p_tenant_column name
) returns void
language plpgsql
as $$
declare
    column_type regtype;
    clamp text;
begin
    select a.atttypid::regtype into column_type
      from pg_attribute a
     where a.attrelid = p_table and a.attname = p_tenant_column and not a.attisdropped;
    if column_type is null then
        raise exception 'fairqueue.protect_table: % has no column %', p_table, p_tenant_column;
    end if;
    if column_type = 'uuid'::regtype then
        clamp := format('%I = fairqueue.current_tenant()::uuid', p_tenant_column);
    elsif column_type in ('text'::regtype, 'character varying'::regtype) then
        clamp := format('%I = fairqueue.current_tenant()', p_tenant_column);
    else
        raise exception 'fairqueue.protect_table: %.% is %, not text or uuid',
            p_table, p_tenant_column, column_type;
    end if;
    execute format('alter table %s enable row level security', p_table);
    execute format('alter table %s force row level security', p_table);
    execute format('drop policy if exists fairqueue_tenant on %s', p_table);
    execute format('create policy fairqueue_tenant on %s to fairqueue_app using (%s) with check (%s)',
                   p_table, clamp, clamp);
end $$;
alter function fairqueue.protect_table(regclass, name) owner to fairqueue_owner;
revoke all on function fairqueue.protect_table(regclass, name) from public, fairqueue_app;
grant execute on function fairqueue.protect_table(regclass, name) to public;
