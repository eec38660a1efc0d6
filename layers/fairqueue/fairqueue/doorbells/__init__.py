"""Doorbells: a message that says "look at the table", and the ways to send one.

The queue's state is the ``jobs`` table and nothing else. A doorbell only wakes someone up
sooner than the next cron sweep would: it names one job and its tenant, and carries nothing a
worker could act on without reading the row (no payload, no type, no attempt count). The
worker claims the job by id under that tenant; a duplicate, late or mismatched doorbell claims
zero rows and is dropped.

So losing a doorbell loses nothing. The job row is the outbox: it is written in the caller's
transaction, the doorbell is published after (or, for Postgres, with) the commit, and a sweep
republishes for pending rows whose doorbell never went out. That is why ``publish`` never
raises for a transport failure: it logs and hands back the doorbells that did not go, and the
caller leaves them to the sweep.

Adapters, chosen by ``FAIRQUEUE_DOORBELLS`` (see :func:`adapter_from_env`):

- ``sqs``: Amazon SQS, ten messages per ``SendMessageBatch`` call.
- ``postgres``: ``pg_notify`` on the caller's connection; receive with :func:`listen` or
  :class:`PostgresListener`.
- ``memory``: a queue inside this process, for development and tests. Production refuses it.

The message and the adapters' protocol are in :mod:`fairqueue.doorbells.message`, the SQS adapter in
:mod:`fairqueue.doorbells.sqs`; every name is importable from here too.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator, Mapping, Sequence
from time import monotonic
from types import TracebackType
from typing import Any, Final, Self, get_args

import psycopg
from psycopg import sql

from ..db import connect
from ..errors import ConfigurationError, InvalidDoorbell
from ..settings import DoorbellChoice, Settings, settings, settings_of
from .message import Doorbell, DoorbellAdapter
from .sqs import SQS_BATCH_LIMIT, SqsDoorbells

__all__ = [
    "ADAPTERS",
    "CHANNEL",
    "SQS_BATCH_LIMIT",
    "Doorbell",
    "DoorbellAdapter",
    "InvalidDoorbell",
    "MemoryDoorbells",
    "PostgresDoorbells",
    "PostgresListener",
    "SqsDoorbells",
    "adapter_from_env",
    "adapter_from_settings",
    "listen",
]

log = logging.getLogger("fairqueue.doorbells")

CHANNEL: Final = "fairqueue_doorbell"
"""The LISTEN/NOTIFY channel the Postgres adapter publishes on."""

ADAPTERS: Final = get_args(DoorbellChoice)
"""The values ``FAIRQUEUE_DOORBELLS`` accepts."""


class PostgresDoorbells:
    """``pg_notify`` on the caller's own connection.

    NOTIFY is transactional: a notification sent inside a transaction is delivered when that
    transaction commits, and never if it rolls back. Called on the connection that is inserting
    the job, in the same transaction, the doorbell therefore rings exactly when the row becomes
    visible to other sessions, with no "after commit" step to forget and no window in which a
    listener hears of a row it cannot see yet. That makes it the natural Postgres adapter.

    ``publish`` runs in a savepoint (or, on an idle connection, a transaction of its own), so a
    failure leaves the caller's transaction usable. Listeners must hold their own autocommit
    connection on the same database: see :class:`PostgresListener`. Postgres folds identical
    notifications within one transaction into one, which costs nothing here.
    """

    name = "postgres"

    def __init__(self, conn: psycopg.Connection[Any], *, channel: str = CHANNEL) -> None:
        self._conn = conn
        self.channel = channel

    def publish(self, doorbells: Sequence[Doorbell]) -> list[Doorbell]:
        if not doorbells:
            return []
        bodies = [doorbell.to_json() for doorbell in doorbells]
        try:
            with self._conn.transaction():
                self._conn.execute(
                    "select pg_notify(%s, body) from unnest(%s::text[]) as body",
                    (self.channel, bodies),
                )
        except psycopg.Error as exc:
            log.warning(
                "doorbells: NOTIFY failed, %d doorbell(s) left for the sweep: %s",
                len(doorbells),
                exc,
            )
            return list(doorbells)
        return []

    def close(self) -> None:
        """The connection is the caller's: nothing to release."""


def listen_dsn(dsn: str) -> str:
    """Where the Postgres doorbells LISTEN: ``FAIRQUEUE_LISTEN_DATABASE_URL`` when set, else
    ``dsn``. A transaction pooler hands each transaction to any backend, so a ``LISTEN`` through
    it hears nothing: behind one (``FAIRQUEUE_POOLER=transaction``) the direct URL is required."""
    config = settings()
    if config.listen_database_url:
        return config.listen_database_url
    if config.pooler == "transaction":
        raise ConfigurationError(
            "the Postgres doorbells LISTEN on a session of their own, which a transaction pooler"
            " does not keep: set FAIRQUEUE_LISTEN_DATABASE_URL to a direct connection"
        )
    return dsn


class PostgresListener:
    """A connection of its own that LISTENs for doorbells from the moment it is made.

    Use it when the order matters (a test, or a worker that must not miss the first doorbell
    after it reports ready)::

        with PostgresListener(dsn) as listener:
            ...                                    # listening already
            for doorbell in listener.doorbells(timeout_s=5):
                ...

    Malformed payloads on the channel are logged and skipped.
    """

    def __init__(self, dsn: str, *, channel: str = CHANNEL) -> None:
        self.channel = channel
        self._conn = connect(listen_dsn(dsn), autocommit=True, as_app_role=True, pooled=False)
        try:
            self._conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            self._conn.close()
            raise

    def doorbells(self, timeout_s: float, *, stop_after: int | None = None) -> Iterator[Doorbell]:
        """Yield doorbells as they arrive, for at most ``timeout_s`` seconds in all.

        With ``stop_after``, stop once that many valid doorbells came. As with psycopg's
        ``notifies``, a few more may be yielded when they arrived in the same packet: they are
        handed over rather than dropped.
        """
        deadline = monotonic() + timeout_s
        remaining = stop_after
        while remaining is None or remaining > 0:
            left = max(0.0, deadline - monotonic())
            for notify in self._conn.notifies(timeout=left, stop_after=remaining):
                doorbell = self._parsed(notify)
                if doorbell is None:
                    continue
                if remaining is not None:
                    remaining -= 1
                yield doorbell
            if monotonic() >= deadline:
                return

    def take(self, timeout_s: float) -> list[Doorbell]:
        """Waits at most ``timeout_s`` for a doorbell; once one came, returns it with every other
        already here, without waiting for more."""
        heard = list(self._conn.notifies(timeout=timeout_s, stop_after=1))
        if heard:
            heard += self._conn.notifies(timeout=0)
        return [doorbell for doorbell in map(self._parsed, heard) if doorbell is not None]

    def _parsed(self, notify: psycopg.Notify) -> Doorbell | None:
        try:
            return Doorbell.parse(notify.payload)
        except InvalidDoorbell as exc:
            log.warning("doorbells: skipped a payload on %s: %s", self.channel, exc)
            return None

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def listen(
    dsn: str, timeout_s: float, *, stop_after: int | None = None, channel: str = CHANNEL
) -> Iterator[Doorbell]:
    """Doorbells published on ``dsn``'s database during the next ``timeout_s`` seconds.

    The connection opens and LISTENs when iteration starts, and closes when it ends (time is
    up, ``stop_after`` doorbells came, or the caller stops iterating). Doorbells sent before
    that are not seen; the sweep covers them. Use :class:`PostgresListener` to be listening
    before something publishes.
    """
    with PostgresListener(dsn, channel=channel) as listener:
        yield from listener.doorbells(timeout_s, stop_after=stop_after)


class MemoryDoorbells:
    """A queue inside this process: for development and tests, never for production."""

    name = "memory"

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Doorbell] = queue.SimpleQueue()

    def publish(self, doorbells: Sequence[Doorbell]) -> list[Doorbell]:
        for doorbell in doorbells:
            self._queue.put(doorbell)
        return []

    def receive(self, timeout_s: float | None = None) -> Doorbell | None:
        """The next doorbell, waiting up to ``timeout_s`` (forever when None); None if none came."""
        try:
            return self._queue.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def drain(self) -> list[Doorbell]:
        """Every doorbell waiting now, oldest first, without waiting for more."""
        drained: list[Doorbell] = []
        while True:
            try:
                drained.append(self._queue.get_nowait())
            except queue.Empty:
                return drained

    def close(self) -> None:
        """Nothing to release."""


def adapter_from_env(
    env: Mapping[str, str] | None = None,
    *,
    conn: psycopg.Connection[Any] | None = None,
    sqs_client: Any = None,
) -> DoorbellAdapter:
    """The adapter ``FAIRQUEUE_DOORBELLS`` names in ``env`` (a mapping like ``os.environ``;
    None: the process's environment); see :func:`adapter_from_settings`."""
    config = settings_of(env)
    return adapter_from_settings(config, conn=conn, sqs_client=sqs_client)


def adapter_from_settings(
    config: Settings,
    *,
    conn: psycopg.Connection[Any] | None = None,
    sqs_client: Any = None,
) -> DoorbellAdapter:
    """The adapter ``FAIRQUEUE_DOORBELLS`` names: ``sqs``, ``postgres`` or ``memory``.

    - ``sqs`` needs ``FAIRQUEUE_DOORBELL_QUEUE_URL``; ``sqs_client`` overrides the boto3 client.
    - ``postgres`` needs ``conn``: the connection that enqueues, so the doorbell shares the
      job's transaction.
    - ``memory`` is the default when the variable is unset, except under
      ``FAIRQUEUE_ENV=production``, which refuses it (set or defaulted): doorbells that
      never leave the process would leave doorbell stages waiting for the cron sweep.

    Anything else raises :class:`~fairqueue.errors.ConfigurationError` naming the variable
    (the settings refuse a value that is not one of the three).
    """
    choice = config.doorbells
    if choice is None:
        if config.production:
            raise ConfigurationError(
                "FAIRQUEUE_DOORBELLS is not set and FAIRQUEUE_ENV=production refuses the "
                "in-memory default: set FAIRQUEUE_DOORBELLS to sqs or postgres"
            )
        choice = "memory"
    if choice == "sqs":
        queue_url = config.doorbell_queue_url or ""
        if not queue_url.startswith(("https://", "http://")):
            raise ConfigurationError(
                "FAIRQUEUE_DOORBELLS=sqs needs FAIRQUEUE_DOORBELL_QUEUE_URL, the queue's URL "
                f"(https://sqs.<region>.amazonaws.com/<account>/<name>); got {queue_url!r}"
            )
        return SqsDoorbells(queue_url, client=sqs_client)
    if choice == "postgres":
        if conn is None:
            raise ConfigurationError(
                "FAIRQUEUE_DOORBELLS=postgres needs the database connection that enqueues: "
                "pass conn= to adapter_from_env"
            )
        return PostgresDoorbells(conn)
    if config.production:
        raise ConfigurationError(
            "FAIRQUEUE_DOORBELLS=memory is refused when FAIRQUEUE_ENV=production: in-memory "
            "doorbells never leave this process; set FAIRQUEUE_DOORBELLS to sqs or postgres"
        )
    return MemoryDoorbells()
