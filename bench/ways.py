"""The ways the pooled comparisons reach the server, direct and through a PgBouncer
(``fairqueue.dev.pooler``), and what they count: the server connections each way used.

The admission workload also runs each way as a fleet of one-connection API processes
(bench/api_fleet.py), as Lambda runs the API: one connection per warm container."""

from __future__ import annotations

import threading
from typing import Any, Literal

import psycopg

from . import database

SAMPLE_S = 0.02

# How the library reaches the server in the pooled comparisons.
Way = Literal["direct", "pooled", "fleet", "fleet_pooled"]
WAYS: tuple[Way, ...] = ("direct", "pooled", "fleet", "fleet_pooled")
WAY_TITLES: dict[Way, str] = {
    "direct": "direct",
    "pooled": "through PgBouncer",
    "fleet": "fleet of one-connection processes, direct",
    "fleet_pooled": "fleet of one-connection processes, through PgBouncer",
}
# Each way through the pooler, and the way it is compared with.
POOLED_VERSUS: dict[Way, Way] = {"pooled": "direct", "fleet_pooled": "fleet"}


class Watch:
    """The most backends matching `where` seen at once, sampled in a thread until stopped."""

    def __init__(self, dsn: str, where: str, params: tuple[Any, ...]) -> None:
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.sql = f"select count(*) from pg_stat_activity where datname = %s and {where}"
        self.params = (database.database_name(dsn), *params)
        self.most = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.stopping.is_set():
            row = self.conn.execute(self.sql, self.params).fetchone()
            self.most = max(self.most, int(row[0]) if row else 0)
            self.stopping.wait(SAMPLE_S)

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(timeout=10)
        self.conn.close()
        return self.most
