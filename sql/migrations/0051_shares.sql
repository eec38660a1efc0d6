-- Weighted shares (Stage(order="shares"), Plan(weight=)): each plan's groups take a quantum in
-- proportion to the plan's weight, so the claim's fill level counts each queue's own quantum.
drop function if exists fairqueue.fill_levels(text[], bigint[], bigint[], integer);

-- Each plan's quantum of a type, where it is not the type's own (type_quanta): under shares a
-- plan's groups take the stage's quantum times the plan's weight. A standing's quantum is its
-- plan's here, else its type's, else 1 (fairqueue.standing_quantum, sql/order/claim.sql); the
-- claim door stamps both tables, and the standings with them, when the quanta change.
create table fairqueue.plan_quanta (
    type text not null,
    plan text not null,
    quantum integer not null check (quantum between 1 and 1000),
    primary key (type, plan)
);
alter table fairqueue.plan_quanta owner to fairqueue_owner;

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
