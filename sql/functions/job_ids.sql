-- A new job's id: a version 7 UUID (RFC 9562). Its first six bytes are the Unix time in
-- milliseconds, the next twelve bits count the ids a session draws within the millisecond (the
-- low bits of fairqueue.job_id_order, whose values each session takes from a cache of its own),
-- then come the variant's two bits and 62 random bits. Ids drawn in a later millisecond sort
-- later, and a session's ids in the order it drew them, so a new job's primary key entry lands
-- at the right edge of the index: the index stays dense (splits at the edge leave full pages
-- behind, where random ids split pages everywhere), a bulk insert touches a few pages, and the
-- jobs enqueued together share a few pages for the claims and completions that look them up by
-- id a batch at a time (docs/design/storage.md, "Job ids in time order"). The random bits come from the
-- session's random(), seeded from the strong source on its first use in a session: they only
-- tell apart ids of one millisecond whose counts are equal (a count that wrapped, or two
-- sessions' caches that meet), and gen_random_uuid() reads the strong source for every id,
-- which was half of an id's cost. One expression, so that the planner inlines it into the
-- statement that draws the ids; its names are schema-qualified for the same reason.
create or replace function fairqueue.new_job_id() returns uuid
language sql volatile parallel unsafe
as $$
select pg_catalog.encode(
           pg_catalog.substr(pg_catalog.int8send(pg_catalog.floor(
               pg_catalog.date_part('epoch', pg_catalog.clock_timestamp())
               operator(pg_catalog.*) 1000)::bigint), 3)
           operator(pg_catalog.||) pg_catalog.int2send((28672 operator(pg_catalog.|)
               (pg_catalog.nextval('fairqueue.job_id_order') operator(pg_catalog.%) 4096)
           )::smallint)
           operator(pg_catalog.||) pg_catalog.int4send((-2147483648 operator(pg_catalog.+)
               pg_catalog.floor(pg_catalog.random() operator(pg_catalog.*) 1073741824::float8)
           )::integer)
           operator(pg_catalog.||) pg_catalog.int4send((-2147483648 operator(pg_catalog.+)
               pg_catalog.floor(pg_catalog.random() operator(pg_catalog.*) 4294967296::float8)
           )::integer),
           'hex')::uuid
$$;

alter function fairqueue.new_job_id() owner to fairqueue_owner;
revoke all on function fairqueue.new_job_id() from public, fairqueue_app;
grant execute on function fairqueue.new_job_id() to fairqueue_app;
