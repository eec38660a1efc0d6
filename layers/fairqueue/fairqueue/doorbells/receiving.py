"""Where a long-running worker hears doorbells: the Postgres channel, an SQS queue, or this
process's memory (``FAIRQUEUE_DOORBELLS``).

Every source's ``take`` waits a bounded time for the first doorbell and returns it with every
other one already there, without waiting for more: a doorbell is handed on the moment it is
heard.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import boto3
import psycopg

from ..errors import ConfigurationError, DatabaseUnavailable, InvalidDoorbell, describe
from ..pipeline.connections import RETRY_DELAYS_S
from ..settings import settings
from . import MemoryDoorbells, PostgresListener, ringing
from .message import Doorbell
from .sqs import SQS_BATCH_LIMIT

log = logging.getLogger("fairqueue.doorbells")


class DoorbellSource(Protocol):
    def take(self, timeout_s: float) -> list[Doorbell]:
        """The doorbells heard within ``timeout_s``: the first one and all then waiting."""
        ...

    def close(self) -> None: ...


class PostgresSource:
    """LISTEN on a connection of its own (PostgresListener), listening again on a new one when
    it is lost (a restart of the server): the doorbells published meanwhile are not heard, and
    the sweep rings their jobs again, as it does any lost doorbell's."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._listener = PostgresListener(dsn)

    def take(self, timeout_s: float) -> list[Doorbell]:
        try:
            return self._listener.take(timeout_s)
        except psycopg.OperationalError as exc:
            log.warning("doorbells: the LISTEN connection was lost (%s); listening again", exc)
        self._listener.close()
        for delay in (0.0, *RETRY_DELAYS_S):
            time.sleep(delay)
            try:
                self._listener = PostgresListener(self.dsn)
                return []
            except psycopg.OperationalError as exc:
                problem = describe(exc)
        raise DatabaseUnavailable(f"doorbells: could not LISTEN again: {problem}")

    def close(self) -> None:
        self._listener.close()


class MemorySource:
    """The in-process queue of ``FAIRQUEUE_DOORBELLS=memory`` (development and tests)."""

    def __init__(self, adapter: MemoryDoorbells) -> None:
        self._adapter = adapter

    def take(self, timeout_s: float) -> list[Doorbell]:
        first = self._adapter.receive(timeout_s)
        return [] if first is None else [first, *self._adapter.drain()]

    def close(self) -> None:
        """The queue is the process's: nothing to release."""


class SqsSource:
    """Long-polls the queue, at most ten messages a receive. A message is deleted as soon as
    its doorbell is read: the job row is the queue's state, and a job whose doorbell is lost
    after that is rung again by the sweep. A malformed message stays, to reach the dead-letter
    queue after its receives run out."""

    def __init__(self, queue_url: str) -> None:
        self.queue_url = queue_url
        self._client: Any = boto3.client("sqs")

    def take(self, timeout_s: float) -> list[Doorbell]:
        messages = self._client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=SQS_BATCH_LIMIT,
            WaitTimeSeconds=max(1, int(timeout_s)),
        ).get("Messages", [])
        doorbells, read = [], []
        for message in messages:
            try:
                doorbells.append(Doorbell.parse(message["Body"]))
                read.append(message)
            except InvalidDoorbell as exc:
                log.warning("malformed doorbell %s: %s", message["MessageId"], exc)
        if read:
            self._client.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(read)
                ],
            )
        return doorbells

    def close(self) -> None:
        self._client.close()


def source_for(dsn: str) -> DoorbellSource:
    """The source ``FAIRQUEUE_DOORBELLS`` names (memory when unset, outside production)."""
    config = settings()
    kind = config.doorbells or "memory"
    if kind == "postgres":
        return PostgresSource(dsn)
    if kind == "sqs":
        if not config.doorbell_queue_url:
            raise ConfigurationError("FAIRQUEUE_DOORBELLS=sqs needs FAIRQUEUE_DOORBELL_QUEUE_URL")
        return SqsSource(config.doorbell_queue_url)
    adapter = ringing.adapter_for(None)
    if not isinstance(adapter, MemoryDoorbells):
        raise ConfigurationError(f"no way to receive doorbells from {adapter.name!r}")
    return MemorySource(adapter)
