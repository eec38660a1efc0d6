-- fairqueue.claim_firsts returns each first job with what the claim ranks it by, so its result
-- type changes: the earlier form is dropped here and defined again with the rest of
-- sql/order/claim.sql after the migrations.
drop function if exists fairqueue.claim_firsts(text, integer, text[], integer[], integer, boolean);
