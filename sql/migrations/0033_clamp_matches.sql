-- fairqueue.clamp_unless_clamped also answers whether the clamp is the tenant's own (matches),
-- which enqueue, enqueue_many and the admission each worked out for themselves: its earlier
-- form, which answered two columns, is dropped here and defined again with the rest of
-- sql/functions/tenant_clamp.sql after the migrations.
drop function if exists fairqueue.clamp_unless_clamped(text);
