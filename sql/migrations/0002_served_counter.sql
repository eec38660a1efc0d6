-- Served-in-the-last-day per (type, group), kept O(groups) for the claim.
--
-- served.n counts the jobs whose served_at is newer than the watermark. A trigger applies every
-- change to jobs as it happens (sql/order/jobs_served.sql); expire_served() moves the watermark up to now() - 1 day and
-- subtracts what it passed. Statements that change rows near the window's edge take a shared
-- advisory lock that the expiry takes exclusively, so the two never count one row differently.

create table fairqueue.served (
    type      text not null,
    group_key text not null,
    n         bigint not null default 0,
    primary key (type, group_key)
);

create table fairqueue.served_watermark (
    singleton boolean primary key default true check (singleton),
    watermark timestamptz not null
);

insert into fairqueue.served_watermark (watermark) values (now() - interval '1 day');

