"""Where a long-running worker hears doorbells: the Postgres channel, an SQS queue, or this
process's memory (``FAIRQUEUE_DOORBELLS``).

Every source's ``take`` waits a bounded time for the first doorbell and returns it with every
other one already there, without waiting for more: a doorbell is handed on the moment it is
heard.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import boto3

from ..errors import ConfigurationError, InvalidDoorbell
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
        return PostgresListener(dsn)
    if kind == "sqs":
        if not config.doorbell_queue_url:
            raise ConfigurationError("FAIRQUEUE_DOORBELLS=sqs needs FAIRQUEUE_DOORBELL_QUEUE_URL")
        return SqsSource(config.doorbell_queue_url)
    adapter = ringing.adapter_for(None)
    if not isinstance(adapter, MemoryDoorbells):
        raise ConfigurationError(f"no way to receive doorbells from {adapter.name!r}")
    return MemorySource(adapter)
