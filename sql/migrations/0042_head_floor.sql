-- Whether a standing's head lies at or before every due job its group has or will have
-- committed, so that the next head is read from it on (sql/order/served.sql,
-- recompute_heads). No standing's head is known to be so until a head is set again under a lock
-- no enqueue shares.
alter table fairqueue.served add column head_is_floor boolean not null default false;
-- group_head now reads from a given job on; the two-argument form is dropped here and defined
-- again with the rest of sql/order/served.sql after the migrations.
drop function if exists fairqueue.group_head(text, text);
-- recompute_heads now takes the jobs a statement brought as well as those it took away.
drop function if exists fairqueue.recompute_heads(text[], text[], bigint[],
    timestamp with time zone[]);
