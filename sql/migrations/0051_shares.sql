-- Weighted shares (Stage(order="shares"), Plan(weight=)): each plan's groups take a quantum in
-- proportion to the plan's weight, so the claim's fill level counts each queue's own quantum.
drop function if exists fairqueue.fill_levels(text[], bigint[], bigint[], integer);

-- Each plan's quantum of a type, beside the plan's name, as the claim was last handed them: under
-- shares a plan's groups take the stage's quantum times the plan's weight. A standing's quantum
-- is its plan's here, else the type's default (quantum), else 1 (fairqueue.standing_quantum,
-- sql/order/claim.sql); the claim door stamps the row, and the standings with it, when the
-- quanta change, and compares the arrays with what it is handed: one key read a claim.
alter table fairqueue.type_quanta
    add column plan_names text[] not null default '{}',
    add column plan_quanta integer[] not null default '{}';

-- A first job carries its standing's quantum into the picks, each group its own.
alter type fairqueue.ranked_job add attribute quantum integer;

-- The claim takes each plan's quantum now; the old signatures go, and sql/order/claim.sql,
-- claim_firsts.sql and claim_picks.sql define the new ones after the migrations.
drop function if exists fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer, integer);
drop function if exists fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer, integer);
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer, integer,
    boolean);
drop function if exists fairqueue.claim_picks(text, integer, text[], integer[], integer, integer,
    fairqueue.ranked_job[], boolean);
drop function if exists fairqueue.quantum_stamped(text, integer);
drop function if exists fairqueue.ready_for_claim(text, integer);
drop function if exists fairqueue.type_quantum(text);
