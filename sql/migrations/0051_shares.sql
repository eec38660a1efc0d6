-- Weighted shares (Stage(order="shares"), Plan(weight=)): each plan's groups take a quantum in
-- proportion to the plan's weight, so the claim's fill level counts each queue's own quantum.
drop function if exists fairqueue.fill_levels(text[], bigint[], bigint[], integer);
