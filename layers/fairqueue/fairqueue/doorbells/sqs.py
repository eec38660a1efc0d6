"""Doorbells through Amazon SQS: ten messages per ``SendMessageBatch`` call."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final, Self

from ..errors import ConfigurationError
from .message import Doorbell

log = logging.getLogger("fairqueue.doorbells")

SQS_BATCH_LIMIT: Final = 10
"""The most entries SQS accepts in one ``SendMessageBatch`` call."""


class SqsDoorbells:
    """Amazon SQS through boto3.

    Without ``client``, one is made with ``boto3.client("sqs")`` and short timeouts: a doorbell
    is worth little, so an enqueue should not wait a minute for an unreachable queue. boto3 reads
    the region and credentials from the environment, and the endpoint from
    ``AWS_ENDPOINT_URL_SQS`` when set (a local stand-in such as moto). A client passed in is
    the caller's to close.

    The queue may be standard only: FIFO queues need a message group id that doorbells do not
    set.
    """

    name = "sqs"

    def __init__(self, queue_url: str, client: Any = None) -> None:
        if not queue_url:
            raise ConfigurationError("SqsDoorbells needs the queue URL")
        self.queue_url = queue_url
        self._owns_client = client is None
        self._client: Any = _sqs_client() if client is None else client

    def publish(self, doorbells: Sequence[Doorbell]) -> list[Doorbell]:
        from botocore.exceptions import BotoCoreError, ClientError

        failed: list[Doorbell] = []
        for start in range(0, len(doorbells), SQS_BATCH_LIMIT):
            chunk = doorbells[start : start + SQS_BATCH_LIMIT]
            entries = [
                {"Id": str(index), "MessageBody": doorbell.to_json()}
                for index, doorbell in enumerate(chunk)
            ]
            try:
                response = self._client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except ClientError as exc:
                # The service answered and refused this call: the next chunk may still go.
                log.warning(
                    "doorbells: SQS refused %d doorbell(s) for %s: %s",
                    len(chunk),
                    self.queue_url,
                    exc,
                )
                failed.extend(chunk)
                continue
            except BotoCoreError as exc:
                # No answer (connection refused, timeout): do not wait again for each chunk.
                rest = doorbells[start:]
                log.warning(
                    "doorbells: SQS unreachable, %d doorbell(s) left for the sweep (%s): %s",
                    len(rest),
                    self.queue_url,
                    exc,
                )
                failed.extend(rest)
                break
            sent = _sent_ids(response, self.queue_url)
            failed.extend(d for index, d in enumerate(chunk) if str(index) not in sent)
        return failed

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _sqs_client() -> Any:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    config = Config(
        connect_timeout=2,
        read_timeout=5,
        retries={"mode": "standard", "total_max_attempts": 2},
    )
    try:
        return boto3.client("sqs", config=config)
    except NoRegionError:
        raise ConfigurationError(
            "SQS doorbells need an AWS region: set AWS_REGION or AWS_DEFAULT_REGION"
        ) from None


def _sent_ids(response: Any, queue_url: str) -> set[str]:
    """The entry ids SQS accepted; logs each entry it refused."""
    for entry in response.get("Failed", []):
        log.warning(
            "doorbells: SQS refused entry %s for %s: %s %s (sender fault: %s)",
            entry.get("Id"),
            queue_url,
            entry.get("Code"),
            entry.get("Message"),
            entry.get("SenderFault"),
        )
    return {str(entry["Id"]) for entry in response.get("Successful", [])}
