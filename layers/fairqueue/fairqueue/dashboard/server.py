"""``fairqueue serve --role dashboard``: the dashboard behind cheroot's WSGI server, as the API's
local server runs (a few request threads, one bounded pool of application-role connections),
listening on ``FAIRQUEUE_DASHBOARD_HOST`` (127.0.0.1) and ``FAIRQUEUE_DASHBOARD_PORT``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Final

from cheroot import wsgi

from ..api.server import ApiConnections
from ..errors import ConfigurationError
from ..settings import settings_of
from ..stage import Stage
from .app import Dashboard

log = logging.getLogger("fairqueue.dashboard")

# A handful of operators: four request threads, each with at most one connection.
THREADS: Final = 4
REQUEST_TIMEOUT_S: Final = 10
SHUTDOWN_TIMEOUT_S: Final = 10


def dashboard_address(env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """``FAIRQUEUE_DASHBOARD_HOST`` (127.0.0.1) and ``FAIRQUEUE_DASHBOARD_PORT`` (8090)."""
    found = settings_of(env)
    return found.dashboard_host, found.dashboard_port


class _Server(wsgi.Server):
    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        # cheroot's own troubles (a client gone mid-request) go to the log, not stderr.
        log.log(level, "%s", msg or "the HTTP server reported an error")


class DashboardServer:
    """The dashboard over HTTP on this machine. It listens from construction (a taken port is
    a ConfigurationError); ``serve_until`` answers until its event is set."""

    def __init__(
        self,
        address: tuple[str, int],
        dsn: str,
        *,
        secret: str,
        stages: Sequence[Stage] | None = None,
    ) -> None:
        self.connections = ApiConnections(dsn, THREADS)
        by_type = None if stages is None else {s.name: s for s in stages}
        self.app = Dashboard(self.connections.connection, secret, by_type)
        self._http = _Server(
            address,
            self.app,
            numthreads=THREADS,
            server_name="fairqueue-dashboard",
            timeout=REQUEST_TIMEOUT_S,
            shutdown_timeout=SHUTDOWN_TIMEOUT_S,
        )
        try:
            self._http.prepare()
        except OSError as exc:
            self.connections.close()
            raise ConfigurationError(
                f"the dashboard cannot listen on {address[0]}:{address[1]}: {exc}"
            ) from exc
        self._closed = False

    @property
    def url(self) -> str:
        """Where it answers."""
        host, port = self._http.bind_addr[:2]
        return f"http://{host}:{port}"

    def serve_until(self, stop: threading.Event) -> None:
        """Answer requests until ``stop`` is set, then shut down."""
        watcher = threading.Thread(target=self._stop_on, args=(stop,), daemon=True)
        watcher.start()
        try:
            self._http.serve()
        finally:
            stop.set()
            watcher.join()

    def _stop_on(self, stop: threading.Event) -> None:
        stop.wait()
        self._http.stop()

    def close(self) -> None:
        """Stop listening and close the pool."""
        if self._closed:
            return
        self._closed = True
        self._http.stop()
        self.connections.close()

    def __enter__(self) -> DashboardServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
