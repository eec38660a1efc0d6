"""Fast loads: owners through the library, jobs through INSERT ... SELECT generate_series.

Job ``i`` belongs to tenant ``i mod tenants`` and to that tenant's group
``(i / tenants) mod groups_per_tenant``, so every group gets work and history evenly. Times
are spread deterministically (a multiplicative hash of ``i``), so runs are comparable.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from fairqueue.db import Connection
from fairqueue.groups import resume_group
from fairqueue.plans import PLANS, set_plan

from .arrivals import Arrival
from .sizes import Sizes

# Plan mix by tenant number mod 10, as ranks from the lowest priority: 60 % / 30 % / 10 %.
PLAN_MIX = (0, 0, 0, 0, 0, 0, 1, 1, 1, 2)

_OWNER = """
    'bench-t' || lpad(mod(i, %(tenants)s)::text, 5, '0') as tenant_id,
    'bench-t' || lpad(mod(i, %(tenants)s)::text, 5, '0')
      || '-g' || mod(i / %(tenants)s, %(groups_per_tenant)s) as group_id
"""

# When preloaded job i was created (and became due): spread over the last hour, the same for
# every loop that preloads a backlog.
CREATED_AT = "now() - make_interval(secs => mod(i * 7919, 3600) + 1)"

_PENDING = f"""
insert into fairqueue.jobs (type, payload, tenant_id, group_id, created_at, run_after)
select %(type)s, jsonb_build_object('n', i), o.tenant_id, o.group_id, t.at, t.at
  from generate_series(%(first)s::bigint, %(last)s::bigint) as i,
       lateral (select {_OWNER}) as o,
       lateral (select {CREATED_AT} as at) as t
"""

# Done jobs: served_at (the generated column) is finished_at. `newest_s` and `span_s` place
# finished_at in [now() - newest_s - span_s, now() - newest_s).
_HISTORY = f"""
insert into fairqueue.jobs (type, tenant_id, group_id, status, attempts, created_at, run_after,
                            locked_at, finished_at)
select %(type)s, o.tenant_id, o.group_id, 'done', 1, t.at - interval '2 seconds',
       t.at - interval '2 seconds', t.at - interval '1 second', t.at
  from generate_series(%(first)s::bigint, %(last)s::bigint) as i,
       lateral (select {_OWNER}) as o,
       lateral (select now() - make_interval(
                    secs => %(newest_s)s + %(span_s)s * mod(i * 7919, 1000003) / 1000003.0)
                as at) as t
"""


def tenant_id(n: int) -> str:
    return f"bench-t{n:05d}"


def group_id(tenant: int, k: int) -> str:
    return f"{tenant_id(tenant)}-g{k}"


def plan_for(tenant: int) -> str:
    ranked = sorted(PLANS.plans, key=lambda p: p.priority)
    return ranked[min(PLAN_MIX[tenant % len(PLAN_MIX)], len(ranked) - 1)].name


def create_owners(conn: Connection, sizes: Sizes) -> None:
    """Tenants with a mix of plans (fairqueue.plans.set_plan) and their active groups.

    Each call is its own transaction, clamped to its tenant: one transaction cannot work for
    two tenants.
    """
    for t in range(sizes.tenants):
        set_plan(conn, tenant_id(t), plan_for(t))
        for k in range(sizes.groups_per_tenant):
            resume_group(conn, group_id(t, k), tenant_id=tenant_id(t))


_TENANTS = """
insert into fairqueue.tenants (id, plan)
select t.id, t.plan from unnest(%(ids)s::text[], %(plans)s::text[]) as t (id, plan)
"""

_GROUPS = """
insert into fairqueue.groups (id, tenant_id, status)
select g.id, g.tenant_id, 'active'
  from unnest(%(ids)s::text[], %(tenant_ids)s::text[]) as g (id, tenant_id)
"""


def insert_owners(conn: Connection, sizes: Sizes) -> None:
    """The tenants of `create_owners` and their active groups, each set in one statement: rows
    straight into the tables, for the loads of 100,000 groups that one call per owner makes
    slow."""
    tenants = range(sizes.tenants)
    with conn.transaction():
        conn.execute(
            _TENANTS,
            {"ids": [tenant_id(t) for t in tenants], "plans": [plan_for(t) for t in tenants]},
        )
        conn.execute(
            _GROUPS,
            {
                "ids": [group_id(t, k) for t in tenants for k in range(sizes.groups_per_tenant)],
                "tenant_ids": [
                    tenant_id(t) for t in tenants for _ in range(sizes.groups_per_tenant)
                ],
            },
        )


def _owner_params(sizes: Sizes) -> dict[str, int]:
    return {"tenants": sizes.tenants, "groups_per_tenant": sizes.groups_per_tenant}


_PENDING_UNOWNED = f"""
insert into fairqueue.jobs (type, payload, created_at, run_after)
select %(type)s, jsonb_build_object('n', i), t.at, t.at
  from generate_series(1, %(count)s::bigint) as i,
       lateral (select {CREATED_AT} as at) as t
"""


def insert_pending_unowned(conn: Connection, job_type: str, count: int) -> None:
    """`count` due pending jobs with no tenant and no group, created over the last hour (the
    same times as insert_pending's)."""
    with conn.transaction():
        conn.execute(_PENDING_UNOWNED, {"type": job_type, "count": count})


def insert_pending(conn: Connection, sizes: Sizes, job_type: str, count: int) -> None:
    """`count` due pending jobs, created over the last hour."""
    with conn.transaction():
        conn.execute(
            _PENDING,
            {"type": job_type, "first": 1, "last": count, **_owner_params(sizes)},
        )


# Pending jobs in arrival order: created (and due) one millisecond apart, the last just now.
_ARRIVALS = """
insert into fairqueue.jobs (type, payload, tenant_id, group_id, created_at, run_after)
select %(type)s, jsonb_build_object('n', a.n), a.tenant_id, a.group_id, t.at, t.at
  from unnest(%(tenants)s::text[], %(groups)s::text[])
         with ordinality as a (tenant_id, group_id, n),
       lateral (select now() - make_interval(secs => (%(count)s - a.n + 1) / 1000.0) as at) as t
"""


def insert_arrivals(conn: Connection, job_type: str, arrivals: Sequence[Arrival]) -> None:
    """Due pending jobs, one per arrival, whose creation order is the arrival order."""
    with conn.transaction():
        conn.execute(
            _ARRIVALS,
            {
                "type": job_type,
                "tenants": [a.tenant for a in arrivals],
                "groups": [a.group for a in arrivals],
                "count": len(arrivals),
            },
        )


@dataclass(frozen=True)
class HistoryLoad:
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def insert_history(
    conn: Connection,
    sizes: Sizes,
    job_type: str,
    *,
    first: int,
    count: int,
    newest_s: float,
    span_s: float,
) -> HistoryLoad:
    """`count` done jobs numbered from `first`, in chunks; the served trigger counts each row."""
    started = time.perf_counter()
    done = 0
    while done < count:
        n = min(sizes.load_chunk, count - done)
        lo = first + done
        with conn.transaction():
            conn.execute(
                _HISTORY,
                {
                    "type": job_type,
                    "first": lo,
                    "last": lo + n - 1,
                    "newest_s": newest_s,
                    "span_s": span_s,
                    **_owner_params(sizes),
                },
            )
        done += n
    return HistoryLoad(rows=count, seconds=time.perf_counter() - started)
