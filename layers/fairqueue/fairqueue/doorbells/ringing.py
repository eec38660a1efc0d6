"""Ringing the doorbells of doorbell stages' jobs once their rows are committed.

The adapter is the one ``FAIRQUEUE_DOORBELLS`` names, made once per process, or the one a
program installs with ``use_doorbells``. With ``postgres`` the doorbell is a NOTIFY on the
connection that wrote the job. A doorbell that fails to go out is logged and left to the
sweeper, which rings every due doorbell job whose last ring is stale.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from ..db import Connection
from ..settings import settings
from . import Doorbell, DoorbellAdapter, adapter_from_settings

log = logging.getLogger("fairqueue.ringing")

_lock = threading.Lock()
_installed: DoorbellAdapter | None = None
_from_env: DoorbellAdapter | None = None


def use_doorbells(adapter: DoorbellAdapter | None) -> None:
    """Ring through ``adapter`` from now on in this process (None: the environment's, read
    again at the next ring)."""
    global _installed, _from_env
    with _lock:
        _installed = adapter
        if _from_env is not None:
            _from_env.close()
            _from_env = None


def check_configuration() -> None:
    """Refuse to start on a doorbell setting that cannot work here (memory in production)."""
    config = settings()
    if config.doorbells != "postgres":
        adapter_from_settings(config).close()


def adapter_for(conn: Connection | None) -> DoorbellAdapter:
    global _from_env
    with _lock:
        if _installed is not None:
            return _installed
        config = settings()
        if config.doorbells == "postgres":
            return adapter_from_settings(config, conn=conn)
        if _from_env is None:
            _from_env = adapter_from_settings(config)
        return _from_env


def ring(conn: Connection | None, doorbells: Sequence[Doorbell]) -> list[Doorbell]:
    """Publish; returns the doorbells that did not go out (the sweeper rings them later)."""
    if not doorbells:
        return []
    adapter = adapter_for(conn)
    failed = adapter.publish(doorbells)
    if failed:
        log.warning(
            "%d of %d doorbell(s) did not go out; the sweep will ring them",
            len(failed),
            len(doorbells),
        )
    return failed
