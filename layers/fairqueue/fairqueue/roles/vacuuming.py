"""The backstop vacuums the hot tables itself, where the server lets the application role.

Every claim and completion leaves dead row versions in ``fairqueue.jobs`` and
``fairqueue.served``. Autovacuum reclaims them once a table holds its threshold of them, but
only when its pass comes round (``autovacuum_naptime``, and the few autovacuum workers the
whole server shares), so a burst of work grows the tables by the versions it leaves before that
pass. Where the application role holds the ``MAINTAIN`` privilege on them (PostgreSQL 17 and
later; ``sql/policies/vacuum.sql`` grants it), each backstop pass vacuums a table as soon as it
holds that threshold. On older servers the role may not vacuum a table it does not own, and no
function can (``VACUUM`` runs only as a statement of its own), so there the tables are left to
autovacuum as before.
"""

from __future__ import annotations

from psycopg.errors import Diagnostic

from ..db import Connection
from ..errors import ConfigurationError
from ..queries import query

# The named statement that vacuums each hot table (queries/vacuum.sql).
VACUUMS = {"fairqueue.jobs": "vacuum_jobs", "fairqueue.served": "vacuum_served"}
# What the server says when SKIP_LOCKED passes a table over.
_SKIPPED = "skipping vacuum"


def vacuum_hot_tables(conn: Connection) -> list[str]:
    """Vacuum each hot table that holds at least its autovacuum threshold of dead row versions,
    where this role may; the tables vacuumed. A table another vacuum is working on is left to
    it without waiting. ``conn`` must be in autocommit mode: a vacuum is never part of a
    transaction."""
    if not conn.autocommit:
        raise ConfigurationError("the hot tables are vacuumed on an autocommit connection")
    due = [str(row["table_name"]) for row in conn.execute(query("tables_to_vacuum")).fetchall()]
    vacuumed: list[str] = []
    for table in due:
        skipped: list[str] = []

        def note_skip(diagnostic: Diagnostic, skipped: list[str] = skipped) -> None:
            message = str(diagnostic.message_primary or "")
            if message.startswith(_SKIPPED):
                skipped.append(message)

        conn.add_notice_handler(note_skip)
        try:
            conn.execute(query(VACUUMS[table]))
        finally:
            conn.remove_notice_handler(note_skip)
        if not skipped:
            vacuumed.append(table)
    return vacuumed
