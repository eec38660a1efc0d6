-- Which version of each definition file (sql/functions, sql/order, sql/policies) the database
-- holds: `fairqueue migrate` applies a file again only when its text changed or a migration ran.

create table fairqueue.definitions (
    name       text primary key,
    sha256     text not null,
    applied_at timestamptz not null default now()
);

alter table fairqueue.definitions owner to fairqueue_owner;
