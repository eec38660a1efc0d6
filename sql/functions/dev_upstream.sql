-- The development upstream (fairqueue.dev.upstream.DatabaseUpstream): a stand-in service whose
-- held work is kept in this database, so that what one process admitted another releases, and
-- a restart loses none of it. Its table is the stand-in service's own store, not tenant data:
-- it keeps a copy of the work it was given, as a real service keeps it on its side, and answers
-- the whole application as a real service answers one credential. So the application role
-- reads and writes none of it: it calls these two doors, which take the work and hand back an
-- id or a flag, never a payload. Only the owner (an operator, a test) reads the table.
--
-- Records work under its key (the job's id), held (not started) unless p_held is false. A second
-- create of the same key is the same work and changes nothing. The work's id.
create or replace function fairqueue.dev_upstream_hold_unchecked(p_id text, p_type text,
    p_payload jsonb, p_held boolean)
returns text
language sql set search_path = pg_catalog, pg_temp
as $$
insert into fairqueue.dev_upstream_work (id, type, payload, released_at, releases)
values (p_id, p_type, p_payload, case when p_held then null else now() end,
        case when p_held then 0 else 1 end)
on conflict (id) do nothing;
select p_id;
$$;

alter function fairqueue.dev_upstream_hold_unchecked(text, text, jsonb, boolean)
    owner to fairqueue_owner;
revoke all on function fairqueue.dev_upstream_hold_unchecked(text, text, jsonb, boolean)
    from public, fairqueue_app;

-- The door: checks the arguments, then runs dev_upstream_hold_unchecked as the owner.
create or replace function fairqueue.dev_upstream_hold(p_id text, p_type text, p_payload jsonb,
    p_held boolean)
returns text
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_id <> '' and length(p_id) <= 200,
    'dev_upstream_hold: the id must be 1 to 200 characters');
select fairqueue.door_argument(p_type <> '' and length(p_type) <= 200,
    'dev_upstream_hold: the type must be 1 to 200 characters');
select fairqueue.door_argument(jsonb_typeof(p_payload) = 'object'
                                   and octet_length(p_payload::text) <= 16777216,
    'dev_upstream_hold: the payload must be a JSON object of at most 16 MiB');
select fairqueue.door_argument(p_held is not null, 'dev_upstream_hold: held must be given');
select fairqueue.dev_upstream_hold_unchecked(p_id, p_type, p_payload, p_held);
$$;

alter function fairqueue.dev_upstream_hold(text, text, jsonb, boolean) owner to fairqueue_owner;
revoke all on function fairqueue.dev_upstream_hold(text, text, jsonb, boolean)
    from public, fairqueue_app;
grant execute on function fairqueue.dev_upstream_hold(text, text, jsonb, boolean)
    to fairqueue_app;

-- Starts held work: the first release records when, every release is counted, so a second one
-- (after a crash between the call and its record) is no error and starts nothing again.
-- Whether this call was the first; no row when there is no such work.
create or replace function fairqueue.dev_upstream_release_unchecked(p_id text)
returns table (first boolean)
language sql set search_path = pg_catalog, pg_temp
as $$
update fairqueue.dev_upstream_work w
   set released_at = coalesce(w.released_at, now()), releases = w.releases + 1
 where w.id = p_id
returning w.releases = 1;
$$;

alter function fairqueue.dev_upstream_release_unchecked(text) owner to fairqueue_owner;
revoke all on function fairqueue.dev_upstream_release_unchecked(text) from public, fairqueue_app;

-- The door: checks the argument, then runs dev_upstream_release_unchecked as the owner.
create or replace function fairqueue.dev_upstream_release(p_id text)
returns table (first boolean)
language sql security definer set search_path = pg_catalog, pg_temp
as $$
select fairqueue.door_argument(p_id <> '' and length(p_id) <= 200,
    'dev_upstream_release: the id must be 1 to 200 characters');
select * from fairqueue.dev_upstream_release_unchecked(p_id);
$$;

alter function fairqueue.dev_upstream_release(text) owner to fairqueue_owner;
revoke all on function fairqueue.dev_upstream_release(text) from public, fairqueue_app;
grant execute on function fairqueue.dev_upstream_release(text) to fairqueue_app;
