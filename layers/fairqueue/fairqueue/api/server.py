"""The local admission server of ``fairqueue serve --role api``: the resolver behind cheroot's
HTTP/1.1 WSGI server, playing API Gateway (it verifies HS256 tokens signed with
``FAIRQUEUE_API_SECRET`` itself), with one bounded pool of database connections.

Clients keep their connections open between requests; a fixed set of request threads, as
many as the pool has connections, answers whichever connection has a request ready, so a
burst of clients costs neither a thread nor a TCP handshake per request.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from cheroot import server, wsgi
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from ..db import (
    Connection,
    FairqueueConnection,
    app_role_conninfo,
    connection_options,
    is_pooled,
    resolve_dsn,
    work_as_app_role,
)
from ..errors import ConfigurationError, DatabaseUnavailable
from ..settings import settings_of
from .auth import ClaimNames, identity_from_claims, verified_claims
from .heads import HeadGate, http_reply
from .models import error_reply
from .resolver import max_body_bytes
from .routes import PUBLIC_ROUTES, build_resolver, method_not_allowed, route_not_found, route_of
from .wsgi import wsgi_app

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger("fairqueue.api")

# How long a request waits for a free connection before it is 503 database_unavailable; it
# gives up sooner once the pool has failed to connect since it started waiting.
POOL_WAIT_S: Final = 30.0
POOL_POLL_S: Final = 0.2
# A pooled connection idle longer than this is checked with a round trip before it is used.
CHECK_AFTER_IDLE_S: Final = 1.0
# How long the server waits on a silent client, mid-request or between two requests of a
# kept-open connection, before it closes the connection.
REQUEST_TIMEOUT_S: Final = 10
# Clients that arrive at once wait in the listen queue (the usual default of 5 had 40 clients
# connecting together sometimes reset).
LISTEN_BACKLOG: Final = 128


def api_address(env: Mapping[str, str] | None = None) -> tuple[str, int]:
    """``FAIRQUEUE_API_HOST`` (127.0.0.1) and ``FAIRQUEUE_API_PORT`` (8080)."""
    found = settings_of(env)
    return found.api_host, found.api_port


def api_pool_size(env: Mapping[str, str] | None = None) -> int:
    """``FAIRQUEUE_API_POOL_SIZE``: the most connections the local server holds at once, and
    its number of request threads (10)."""
    return settings_of(env).api_pool_size


class ApiConnections:
    """The local server's connections: one ``psycopg_pool`` pool of at most ``size``, each
    connection set up as ``db.connect(autocommit=True, as_app_role=True)`` sets up its own
    (dict rows, the application role). A connection that has been idle longer than
    ``check_after_idle_s`` is checked with a round trip before a request gets it, and replaced
    when it is broken; one back from a request more recently is handed out as it is, so a busy
    server does not pay a round trip per request to check what it just used (a connection
    killed within that window fails its next request with 503 and is then replaced).

    A request that finds no connection free waits for one, up to ``POOL_WAIT_S``; but once
    the pool has failed to open a connection since it last opened one, the database is taken
    to be unreachable and a request that would wait is 503 at once, as it was when each
    request opened its own.
    """

    def __init__(
        self, dsn: str | None, size: int, *, check_after_idle_s: float = CHECK_AFTER_IDLE_S
    ) -> None:
        try:
            # A login that needs the application role's startup parameter gets it in every
            # connection of the pool (db.connect's rule).
            target = app_role_conninfo(dsn)
        except DatabaseUnavailable:
            # Not reachable yet: the server still starts, each new connection is checked as it
            # opens (_configure), and requests answer 503 until the database is back.
            target = resolve_dsn(dsn)
        self._check_after_idle_s = check_after_idle_s
        # When each connection last came back from a request.
        self._returned_at: weakref.WeakKeyDictionary[Connection, float] = (
            weakref.WeakKeyDictionary()
        )
        settings: dict[str, Any] = {"autocommit": True, **connection_options()}
        if "application_name" not in conninfo_to_dict(target):
            settings["application_name"] = "fairqueue-api"
        # Failed connection attempts counted when the pool last opened one.
        self._failures_at_connect = 0
        self.pool = ConnectionPool(
            target,
            connection_class=FairqueueConnection,
            kwargs=settings,
            configure=self._configure,
            check=self._check_if_idle,
            min_size=0,
            max_size=size,
            open=False,
            name="fairqueue-api",
            timeout=POOL_WAIT_S,
        )
        self.pool.open(wait=False)

    def _configure(self, conn: FairqueueConnection) -> None:
        work_as_app_role(conn, pooled=is_pooled())
        self._failures_at_connect = self._failures()

    def _check_if_idle(self, conn: Connection) -> None:
        returned_at = self._returned_at.get(conn)
        if returned_at is None or monotonic() - returned_at > self._check_after_idle_s:
            ConnectionPool.check_connection(conn)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        conn = self._take()
        try:
            yield conn
        finally:
            self._returned_at[conn] = monotonic()
            self.pool.putconn(conn)

    def _take(self) -> FairqueueConnection:
        deadline = monotonic() + POOL_WAIT_S
        while True:
            try:
                return self.pool.getconn(timeout=POOL_POLL_S)
            except PoolTimeout as exc:
                if self._failures() > self._failures_at_connect:
                    raise DatabaseUnavailable("the pool cannot connect to the database") from exc
                if monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"no database connection came free within {POOL_WAIT_S:g} s"
                    ) from exc

    def _failures(self) -> int:
        return self.pool.get_stats().get("connections_errors", 0)

    def close(self) -> None:
        self.pool.close()


def _logged(app: WSGIApplication) -> WSGIApplication:
    """``app``, writing one line per answered request with what an operator filters on."""

    def logged(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        answered: list[str] = []

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answered.append(status)
            return start_response(status, headers, exc_info)

        body = app(environ, start)
        code = answered[-1].partition(" ")[0] if answered else "-"
        log.info(
            "request",
            extra={
                "method": environ.get("REQUEST_METHOD"),
                "path": environ.get("PATH_INFO"),
                "status": int(code) if code.isdigit() else code,
                "client": environ.get("REMOTE_ADDR"),
            },
        )
        return body

    return logged


# The codes of the refusals the HTTP server makes itself, before the resolver sees a request.
_HTTP_REFUSALS: Final[Mapping[int, str]] = {
    400: "malformed_request",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "payload_too_large",
    414: "uri_too_long",
    501: "not_implemented",
    503: "server_busy",
    505: "http_version_not_supported",
}


class _Request(server.HTTPRequest):
    """A request whose refusals by the HTTP server itself (a malformed request line or header,
    an HTTP version it does not speak, CONNECT) are JSON in the API's error shape, as every
    other answer is."""

    def simple_response(self, status: Any, msg: str | bytes = "") -> None:
        code = int(str(status)[:3])
        text = msg.decode("latin-1") if isinstance(msg, bytes) else msg
        reply = error_reply(code, _HTTP_REFUSALS.get(code, "malformed_request"), text)
        if code == 405:
            # Only CONNECT gets here: the resolver answers every other method.
            path = urlsplit(self.uri or b"").path.decode("latin-1")
            route = route_of(path)
            refusal = (
                route_not_found(path) if route is None else method_not_allowed("CONNECT", route)
            )
            reply = refusal.reply()
        # What follows on the connection cannot be read as a request.
        close = reply.status in (413, 414)
        if close:
            self.close_connection = True
        try:
            self.conn.wfile.write(http_reply(self.server.protocol, reply, close=close))
        except OSError:
            # The client went away: nothing to answer.
            self.close_connection = True


class _Connection(server.HTTPConnection):
    RequestHandlerClass = _Request


class _HttpServer(wsgi.Server):
    """cheroot's server, whose request threads get only connections whose request has
    arrived: a :class:`HeadGate` of its own awaits them."""

    ConnectionClass = _Connection
    _gate: HeadGate | None = None

    def prepare(self) -> None:
        super().prepare()
        self._gate = HeadGate(self.protocol, self.timeout, super().process_conn, max_body_bytes)
        self._gate.start()

    def process_conn(self, conn: server.HTTPConnection) -> None:
        if self._gate is None:
            conn.close()
        else:
            self._gate.put(conn)

    def stop(self) -> None:
        # The gate first: a connection that reaches it afterwards is closed.
        if self._gate is not None:
            self._gate.stop()
        super().stop()

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        # cheroot writes its own troubles to stderr; here they go to the log. A client that
        # went away or went silent mid-request is one of them: nothing to answer.
        log.log(level, "%s", msg or "the HTTP server reported an error", exc_info=traceback)


class ApiServer:
    """The API over HTTP on this machine: local HS256 tokens, HTTP/1.1 connections kept open,
    ``pool_size`` (``FAIRQUEUE_API_POOL_SIZE``) request threads and at most as many database
    connections.

    It listens from construction (a taken port is a ConfigurationError); ``serve_forever``
    answers until ``shutdown``, which waits for the requests in flight. Closing it (or leaving
    its ``with`` block) shuts it down and closes the pool.
    """

    def __init__(
        self,
        address: tuple[str, int],
        dsn: str,
        *,
        secret: str,
        names: ClaimNames | None = None,
        pool_size: int | None = None,
    ) -> None:
        size = api_pool_size() if pool_size is None else pool_size
        self.secret = secret
        self.names = names or ClaimNames.from_env()
        self.connections = ApiConnections(dsn, size)
        self.resolver = build_resolver(self.connections.connection, self.names)
        self._http = _HttpServer(
            address,
            _logged(wsgi_app(self.resolver, self.authorize)),
            numthreads=size,
            server_name="fairqueue-api",
            request_queue_size=LISTEN_BACKLOG,
            timeout=REQUEST_TIMEOUT_S,
            # A request in flight finishes whatever this says: after it, only its socket is
            # shut for reading.
            shutdown_timeout=int(POOL_WAIT_S),
        )
        try:
            self._http.prepare()
        except OSError as exc:
            self.connections.close()
            raise ConfigurationError(
                f"the API cannot listen on {address[0]}:{address[1]}: {exc}"
            ) from exc
        self._closed = False

    def authorize(self, path: str, authorization: str | None) -> dict[str, Any] | None:
        """API Gateway's JWT authorizer, played here: the verified claims of a caller whose
        token names a tenant and a lane; None for the routes without the authorizer."""
        if route_of(path) in PUBLIC_ROUTES:
            return None
        claims = verified_claims(authorization, self.secret)
        identity_from_claims(claims, self.names)
        return claims

    @property
    def server_address(self) -> tuple[str, int]:
        host, port = self._http.bind_addr[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.server_address
        return f"http://{host}:{port}"

    def serve_forever(self) -> None:
        """Answer requests until ``shutdown`` (from another thread)."""
        self._http.serve()

    def serve_until(self, stop: threading.Event) -> None:
        """Answer requests until ``stop`` is set, then shut down; serving that fails sets
        ``stop`` too."""
        watcher = threading.Thread(
            target=self._shutdown_on, args=(stop,), name="fq-api-stop", daemon=True
        )
        watcher.start()
        try:
            self.serve_forever()
        finally:
            stop.set()
            watcher.join()

    def _shutdown_on(self, stop: threading.Event) -> None:
        stop.wait()
        self.shutdown()

    def shutdown(self) -> None:
        """Stop listening, close the idle connections and wait for the requests in flight."""
        self._http.stop()

    def server_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.shutdown()
        self.connections.close()

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.server_close()
