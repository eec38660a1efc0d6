-- claim_firsts no longer returns each first job's tenant, which nothing reads since the picks
-- moved to claim_picks; a function's result type cannot be replaced in place, so it is dropped
-- here and defined again with the rest of sql/order/claim.sql after the migrations.
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean);
