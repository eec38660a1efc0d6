-- What the application role may reach in the fairqueue schema: each table's file in this folder
-- says what it may do there and which rows it sees; the functions' files say which it may call.
grant usage on schema fairqueue to fairqueue_app;
