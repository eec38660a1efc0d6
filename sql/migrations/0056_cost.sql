-- Service measured in cost (Stage(fair_by="cost"), enqueue(..., cost=c)): a job carries its
-- cost, a whole number of units declared at enqueue, and `counted`, the units it adds to its
-- group's served count while it is served (running or done in the last day). The claim writes
-- `counted` on every job it takes (its cost under fair_by="cost", else 1), and a completion that
-- spent quota units settles it to what was spent, so every writer of served (the triggers on
-- jobs, the expiry) adds and takes away exactly the units a job counts, whatever path it took.
-- The bound keeps a day's served count (bigint) far from overflowing: a billion units a job.
alter table fairqueue.jobs
    add column cost integer not null default 1 check (cost between 1 and 1000000000),
    add column counted integer not null default 1 check (counted between 1 and 1000000000);
alter table fairqueue.finished_jobs
    add column cost integer not null default 1 check (cost between 1 and 1000000000),
    add column counted integer not null default 1 check (counted between 1 and 1000000000);

-- A first job of a claim carries the units its claim counts it as.
alter type fairqueue.ranked_job add attribute cost integer;

-- The doors and bodies that take the cost, or count it, have new signatures: the old ones go,
-- and sql/functions/ and sql/order/ define them again after the migrations.
drop function if exists fairqueue.enqueue_job(text, text, jsonb, text, text, integer,
    timestamp with time zone, float8);
drop function if exists fairqueue.enqueue_jobs(text, text, jsonb, text[], text[], integer[],
    timestamp with time zone[], float8[]);
drop function if exists fairqueue.admission_insert(uuid, text, jsonb, text, text, text, integer,
    text, uuid, bigint, text, text);
drop function if exists fairqueue.admission(text, text, integer, text, integer, text, bigint, uuid,
    text, text, jsonb, text, integer);
drop function if exists fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer);
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer,
    boolean);
drop function if exists fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean);
drop function if exists fairqueue.take_claimed(uuid[], double precision, text, uuid);
drop function if exists fairqueue.finished_rows_of(uuid[], timestamp with time zone,
    timestamp with time zone);
drop function if exists fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_by_tenant_unchecked(text, integer, double precision,
    text, uuid, text[], integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_by_tenant_picks(text, integer, text[], integer[],
    integer, boolean);
-- The doorbell's claim takes the types counted by cost as well (after the caps' arguments).
drop function if exists fairqueue.jobs_claim_by_ids(uuid[], text[], text[], double precision[],
    text, uuid, text[], integer[], integer);

-- Whoever reads a job, wherever it is, reads its cost and what it counts as served too.
create or replace view fairqueue.all_jobs with (security_invoker = true) as
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
       finished_at, served_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
       release_tries, release_failing_since, output, result_at, group_key, cost, counted
  from fairqueue.jobs
union all
select id, type, payload, tenant_id, group_id, dedupe_key, status, attempts, max_attempts,
       run_after, locked_at, lease_until, locked_by, last_error, run_id, created_at,
       finished_at, served_at, rung_at, lane, delta_of, credit_cost, upstream_id, released_at,
       release_tries, release_failing_since, output, result_at, group_key, cost, counted
  from fairqueue.finished_jobs;
