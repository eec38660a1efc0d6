-- The development upstream's two doors (migrations/functions/dev_upstream.sql): its store is no
-- tenant's and the application role reaches it only through them.

-- name: dev_upstream_hold
select fairqueue.dev_upstream_hold(%(id)s, %(type)s, %(payload)s, %(held)s) as id;

-- name: dev_upstream_release
select first from fairqueue.dev_upstream_release(%(id)s);
