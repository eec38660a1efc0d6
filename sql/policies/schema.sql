-- What the application role may reach in the fairqueue schema: each table's file in this folder
-- says what it may do there and which rows it sees; the functions' files say which it may call.
grant usage on schema fairqueue to fairqueue_app;
-- Which migrations the database has reached is no tenant's data: a command checks it before it
-- starts, so that a database never migrated says so instead of failing on a missing table.
grant select on fairqueue.migrations to fairqueue_app;
