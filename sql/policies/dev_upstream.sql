-- The development upstream's store (functions/dev_upstream.sql) is the stand-in service's, not
-- a tenant's: it holds copies of every tenant's payloads, so the application role may neither
-- read nor write it, only call its two doors.
revoke all on fairqueue.dev_upstream_work from public, fairqueue_app;
