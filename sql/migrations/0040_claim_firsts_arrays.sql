-- fairqueue.claim_firsts returns its first jobs as one row of arrays, which the claim unnests,
-- instead of a row per job that the claim gathered into arrays again: its result type changes,
-- so the earlier form is dropped here and defined again with the rest of sql/order/claim.sql
-- after the migrations.
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean);
