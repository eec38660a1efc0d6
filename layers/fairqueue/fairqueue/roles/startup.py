"""What ``fairqueue tick`` and ``fairqueue serve`` do once with their stages before running them.

A development upstream (``fairqueue.dev.upstream``) keeps its held work in the command's own
database, which ``--database-url`` may name instead of ``DATABASE_URL``: it is bound to it, so
the process that admits and the one that releases share it. When the stages are the example's,
the example's quota is defined unless it exists (``fairqueue.dev.example.prepare_database``).

Development code is imported here only when it already was, by loading the stages: a stage can
hold a development upstream only if ``fairqueue.dev.upstream`` was imported to make it. So
production, whose Lambda layer leaves ``fairqueue.dev`` out, never imports it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..db import connect
from ..stage import Stage


def prepare(stages: Sequence[Stage], dsn: str) -> None:
    if "fairqueue.dev.upstream" in sys.modules:
        from ..dev.upstream import bind_stages  # already loaded: this costs no import

        bind_stages(stages, dsn)
    if "fairqueue.dev.example" not in sys.modules:
        return
    from ..dev import example  # already loaded: this costs no import

    if any(stage is own for stage in stages for own in example.STAGES):
        with connect(dsn, autocommit=True, as_app_role=True) as conn:
            example.prepare_database(conn)
