"""A development upstream whose held work is kept in the fairqueue database.

``DatabaseUpstream`` is what the example's ``analyze`` stage uses when ``FAIRQUEUE_UPSTREAM_URL``
is not set. Every process working on the database sees the same held work: the API process
(``fairqueue serve --role api``) creates it at admission, and ``fairqueue tick``, ``serve`` or
``run`` in another process releases it when the job holds its lane; a restart loses none of it.
``fairqueue.upstream.InProcessUpstream`` keeps it in one process's memory, for unit tests.

Which database: the one it was bound to, else ``DATABASE_URL``. ``fairqueue tick`` and
``fairqueue serve`` bind it to their own (``--database-url`` may name another than
``DATABASE_URL``), and the example's seeding binds it to the seeding connection's. Each call
opens a connection of its own and commits at once, as a call to a real service would: held work
whose admission then failed stays held and is never released, as it would upstream.

Its store (``fairqueue.dev_upstream_work``) is the stand-in service's own, not tenant data: the
application role reaches it only through two doors, which hand back an id or a flag and never a
payload (docs/tenancy.md). ``FAIRQUEUE_ENV=production`` refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from ..db import Connection, connect
from ..errors import ConfigurationError, DatabaseUnavailable, UpstreamRejected, UpstreamUnavailable
from ..queries import query
from ..settings import settings
from ..stage import Stage
from ..upstream import Validator


class DatabaseUpstream:
    """Held work kept in the database (see the module's docstring): development only.

    ``validate`` raises UpstreamRejected (or any ValueError, taken as a rejection) for invalid
    work, as ``InProcessUpstream``'s does.
    """

    def __init__(self, validate: Validator | None = None, *, dsn: str | None = None) -> None:
        if settings().production:
            raise ConfigurationError(
                "DatabaseUpstream is refused when FAIRQUEUE_ENV=production: it is a stand-in "
                "for a real service; use HttpUpstream (FAIRQUEUE_UPSTREAM_URL)"
            )
        self.validate = validate
        self._dsn = dsn

    @property
    def name(self) -> str:
        return "development upstream (held work in the database)"

    def bind(self, database: str | Connection) -> None:
        """Keep the held work in this database (a DSN, or an open connection's database)."""
        self._dsn = database if isinstance(database, str) else dsn_of(database)

    def create(self, job_type: str, payload: dict[str, Any], *, key: str, held: bool = True) -> str:
        if self.validate is not None:
            try:
                self.validate(job_type, payload)
            except ValueError as exc:
                raise UpstreamRejected(f"{self.name} refused the work: {exc}") from exc
        with self._connection() as conn:
            row = conn.execute(
                query("dev_upstream_hold"),
                {"id": key, "type": job_type, "payload": Jsonb(payload), "held": held},
            ).fetchone()
        assert row is not None, "dev_upstream_hold returns one row"
        return str(row["id"])

    def release(self, upstream_id: str) -> None:
        with self._connection() as conn:
            row = conn.execute(query("dev_upstream_release"), {"id": upstream_id}).fetchone()
        if row is None:
            raise UpstreamUnavailable(f"{self.name} has no work {upstream_id}")

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        dsn = self._dsn or settings().database_url
        if not dsn:
            raise ConfigurationError(
                f"the {self.name} has no database: set DATABASE_URL, or bind() it to one"
            )
        try:
            with connect(dsn, autocommit=True, as_app_role=True) as conn:
                yield conn
        except psycopg.errors.InvalidParameterValue as exc:
            # A door's bound: the work itself is what the service refuses.
            raise UpstreamRejected(f"{self.name} refused the work: {exc}") from exc
        except (psycopg.Error, DatabaseUnavailable) as exc:
            # Unreachable, or a database the migrations have not brought its table to.
            raise UpstreamUnavailable(f"{self.name} cannot answer: {exc}") from exc


def dsn_of(conn: Connection) -> str:
    """A DSN for the database an open connection is on, as the same login."""
    password = conn.info.password
    return make_conninfo(conn.info.dsn, **({"password": password} if password else {}))


def bind_stages(stages: Sequence[Stage], database: str | Connection) -> int:
    """Bind every development upstream of these stages to the database; how many there were."""
    bound = [stage.upstream for stage in stages if isinstance(stage.upstream, DatabaseUpstream)]
    for upstream in bound:
        upstream.bind(database)
    return len(bound)
