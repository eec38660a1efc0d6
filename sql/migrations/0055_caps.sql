-- Caps per tenant (Plan(max_running=n)): a tenant on a capped plan has at most n jobs of one type
-- running at once. The claims count a capped tenant's running jobs of the type through the lease
-- index (jobs_lease_idx: a running job holds a lease), which holds what runs, not the backlog;
-- an index of their own, one entry per claimed job, cost every claim about 7 µs a job, caps or
-- none.

-- The claims and the doorbell's claim take each plan's cap now; the old signatures go, and
-- sql/order/claim.sql, claim_firsts.sql, claim_picks.sql, claim_by_tenant.sql and
-- sql/functions/doorbells.sql define the new ones after the migrations.
drop function if exists fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer);
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer,
    boolean);
drop function if exists fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean);
drop function if exists fairqueue.claim_by_tenant(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_by_tenant_unchecked(text, integer, double precision,
    text, uuid, text[], integer[], integer, integer[], integer);
drop function if exists fairqueue.claim_by_tenant_picks(text, integer, text[], integer[],
    integer, boolean);
drop function if exists fairqueue.jobs_claim_by_ids(uuid[], text[], text[], double precision[],
    text, uuid);
-- fairqueue top's groups carry their tenant's plan and running jobs, to show a tenant at its cap.
drop function if exists fairqueue.served_groups(integer);
drop function if exists fairqueue.served_groups_unchecked(integer);
