-- fairqueue.served_near_edge says whether the change it was given reaches near the edge (and so
-- took the edge lock), which the update trigger's quick exit asks: its earlier form, which
-- answered nothing, is dropped here and defined again with the rest of sql/order/served.sql
-- after the migrations.
drop function if exists fairqueue.served_near_edge(timestamp with time zone);
