"""The claim must stay an index walk as the table grows; a plan change here is a regression."""

from fairqueue import PLANS, Stage
from fairqueue.queries import query


def noop(_job: object) -> None:
    pass


Stage("planned", handler=noop)


def nodes(conn, name: str, params: dict) -> list[dict]:
    """Every node of the query's plan, flattened."""
    row = conn.execute("explain (format json) " + query(name), params).fetchone()
    found, todo = [], [row["QUERY PLAN"][0]["Plan"]]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node.get("Plans", []))
    return found


def assert_walks_the_claim_index(plan: list[dict]) -> None:
    assert any(n.get("Index Name") == "jobs_claim_idx" for n in plan)
    seq_scans = [
        n for n in plan if n.get("Relation Name") == "jobs" and n["Node Type"] == "Seq Scan"
    ]
    assert seq_scans == []


def fill(conn) -> None:
    conn.execute(
        "insert into fairqueue.jobs (type, group_id, status, finished_at)"
        " select 'other', 'g' || (i % 50), 'done', now() - (i % 2000) * interval '1 minute'"
        " from generate_series(1, 30000) i"
    )
    conn.execute(
        "insert into fairqueue.jobs (type, group_id)"
        " select 'planned', 'g' || (i % 50) from generate_series(1, 2000) i"
    )
    conn.execute("analyze fairqueue.jobs")


def test_claim_uses_the_claim_index(conn) -> None:
    fill(conn)
    params = {
        "type": "planned",
        "batch": 25,
        "pool": 100,
        "lease_s": 60,
        "locked_by": "plan",
        "run_id": None,
        **PLANS.claim_params(),
    }
    assert_walks_the_claim_index(nodes(conn, "claim_batch", params))


def test_has_claimable_uses_the_claim_index(conn) -> None:
    fill(conn)
    assert_walks_the_claim_index(nodes(conn, "has_claimable", {"type": "planned"}))
