-- A quantum (Stage(quantum=q)): a group at the top of the order gives up to q jobs in a row
-- before the order is taken again, so a batch writes about batch/q standings instead of one per
-- job. The group claim ranks standings by whole quanta served (n / quantum), read from the
-- standing index, so each standing carries its type's quantum and the index orders by the
-- quotient; with a quantum of 1, every row's until a stage sets one, the index orders as it did
-- by n. type_quanta holds each type's quantum when it is not 1: the claim door stamps it, and
-- the standings of the type with it, when a stage's quantum changes (sql/order/claim.sql).
create table fairqueue.type_quanta (
    type text primary key,
    quantum integer not null check (quantum between 1 and 1000)
);
alter table fairqueue.type_quanta owner to fairqueue_owner;

alter table fairqueue.served
    add column quantum integer not null default 1 check (quantum between 1 and 1000);

drop index fairqueue.served_order_idx;
create index served_order_idx on fairqueue.served
    (type, plan, (n / quantum), head_created_at, head_id)
    where head_id is not null and not paused;

-- The group claim's door, body and first jobs take the quantum now: their old signatures go,
-- and sql/order/claim.sql defines them again after the migrations.
drop function if exists fairqueue.claim(text, integer, double precision, text, uuid, text[],
    integer[], integer);
drop function if exists fairqueue.claim_unchecked(text, integer, double precision, text, uuid,
    text[], integer[], integer);
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer,
    boolean);
drop function if exists fairqueue.claim_picks(text, integer, text[], integer[], integer,
    fairqueue.ranked_job[], boolean);
drop function if exists fairqueue.fill_levels(text[], bigint[], bigint[]);
drop function if exists fairqueue.ready_for_claim();
