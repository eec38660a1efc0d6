"""The suite's pooled run: ``FAIRQUEUE_TEST_POOLER=pgbouncer`` (``make test`` sets it where
PgBouncer can run) sends the ``dsn`` fixture, what the library connects with, through a
PgBouncer in transaction mode (``fairqueue.dev.pooler``) on a free loopback port, as a member
of ``fairqueue_app``, with ``FAIRQUEUE_POOLER=transaction`` set. Set-up and checks
(``admin_dsn``, ``conn``) stay direct.

Run as a script, it says whether the pooled run can run here (exit 0) or why not (exit 1).
"""

from __future__ import annotations

import os

from fairqueue.dev.pooler import why_not


def wanted() -> bool:
    return os.environ.get("FAIRQUEUE_TEST_POOLER") == "pgbouncer"


if __name__ == "__main__":
    reason = why_not(os.environ.get("DATABASE_URL"))
    if reason is None:
        print("the pooled run: the library's connections through PgBouncer in transaction mode")
        raise SystemExit(0)
    print(f"the pooled run is skipped: {reason}")
    raise SystemExit(1)
