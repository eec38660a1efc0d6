"""Where a group stands in its type's order, as `fairqueue jobs show` and the dashboard say it
(fairqueue.group_standing): its place and the standings just ahead of it, against the order's
ranking written out plainly over the same standings (plan priority, whole quanta served, oldest
head), on standings of several plans and quanta, some paused or with nothing due."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fairqueue.db import Connection

PLAN_NAMES = ["free", "pro", "team"]
AHEAD = 4


def _standings(conn: Connection, seed: int) -> list[dict[str, Any]]:
    """Standings written straight into served (as the owner), in random plans, counts, quanta
    and heads; a few paused, a few with no head."""
    rng = random.Random(seed)
    start = datetime(2026, 12, 1, tzinfo=UTC)
    rows = []
    for k in range(60):
        rows.append(
            {
                "group_key": f"t{k % 9}/g{k}",
                "plan": rng.choice([*PLAN_NAMES, "", "legacy"]),
                "n": rng.randrange(0, 9),
                "quantum": rng.choice([1, 1, 2, 3]),
                # Heads in a few seconds, so that some tie on time and rank by id.
                "head_created_at": start + timedelta(seconds=rng.randrange(0, 20)),
                "head_id": None if rng.random() < 0.1 else uuid.UUID(int=rng.getrandbits(128)),
                "paused": rng.random() < 0.1,
            }
        )
    with conn.transaction():
        for row in rows:
            conn.execute(
                "insert into fairqueue.served (type, group_key, n, plan, quantum,"
                " head_created_at, head_id, paused)"
                " values ('placed', %(group_key)s, %(n)s, %(plan)s, %(quantum)s,"
                " %(head_created_at)s, %(head_id)s, %(paused)s)",
                row,
            )
    return rows


def _model(
    rows: list[dict[str, Any]], priorities: dict[str, int], default: int, group_key: str
) -> list[tuple[int, bool, str, int]]:
    """The group's place and the AHEAD standings before it, nearest first, own row first."""
    ranked = sorted(
        (r for r in rows if r["head_id"] is not None and not r["paused"]),
        key=lambda r: (
            -priorities.get(r["plan"], default),
            r["n"] // r["quantum"],
            r["head_created_at"],
            r["head_id"],
        ),
    )
    places = [k for k, r in enumerate(ranked) if r["group_key"] == group_key]
    if not places:
        return []
    place = places[0]
    return [
        (k, k == place, ranked[k]["plan"], ranked[k]["n"])
        for k in range(place, max(place - AHEAD, 0) - 1, -1)
    ]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("priorities", [[1, 2, 3], [2, 2, 2], [3, 1, 2]])
def test_every_groups_place_and_those_ahead_match_the_ranking(
    conn: Connection, seed: int, priorities: list[int]
) -> None:
    rows = _standings(conn, seed)
    by_plan = dict(zip(PLAN_NAMES, priorities, strict=True))
    default = 2
    for row in rows:
        found = conn.execute(
            "select place, own, plan, served from fairqueue.group_standing_unchecked("
            "'placed', %s, %s, %s, %s, %s)",
            (row["group_key"], PLAN_NAMES, priorities, default, AHEAD),
        ).fetchall()
        got = [(r["place"], r["own"], r["plan"], r["served"]) for r in found]
        assert got == _model(rows, by_plan, default, row["group_key"]), row["group_key"]
