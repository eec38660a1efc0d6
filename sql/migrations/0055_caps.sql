-- Caps per tenant (Plan(max_running=n)): a tenant on a capped plan has at most n jobs of one type
-- running at once. The claims count a capped tenant's running jobs of the type from this index,
-- one entry per running job, written when a job is claimed and gone when it leaves running; the
-- only cost a queue without caps pays for them. The tenant leads, so that the reads of a type's
-- running jobs by their leases (the expiry, the abandoned jobs' sweep, the reclaim) keep the
-- lease index instead of scanning this one by type.
create index jobs_running_tenant_idx on fairqueue.jobs (tenant_id, type)
    where status = 'running';

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
