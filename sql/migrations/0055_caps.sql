-- Caps per tenant (Plan(max_running=n)): a tenant on a capped plan has at most n jobs of one type
-- running at once. The claims count a capped tenant's running jobs of the type from this index,
-- one entry per running job, written when a job is claimed and gone when it leaves running; the
-- only cost a queue without caps pays for them.
create index jobs_running_tenant_idx on fairqueue.jobs (type, tenant_id)
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
