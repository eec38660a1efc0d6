"""Request heads read whole before a request thread sees them.

cheroot hands a connection to one of its few request threads as soon as a byte arrives, and the
thread then reads the request line and headers with a timeout that starts again on every read:
a client that trickles a header line every few seconds holds the thread for as long as it likes,
and a header of any size is read into memory. Here one thread, :class:`HeadGate`, reads every
connection's head without blocking, and only a head that is complete goes on to the request
threads. A head is bounded in size (``MAX_HEAD_BYTES``: 431) and in total time from the
connection's first wait (``HEAD_TIMEOUT_S``: 408), and at most ``MAX_WAITING_HEADS`` connections
wait for theirs at once (503 beyond). A refusal is the API's JSON error; the connection is then
shut for writing and what the client still sends is read and dropped for ``LINGER_S``, so that
the client reads the answer rather than a reset.
"""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final

from cheroot import makefile, server

from .models import Reply, error_reply

log = logging.getLogger("fairqueue.api")

# The most bytes a request line and its headers may take, blank line included.
MAX_HEAD_BYTES: Final = 64 * 1024
# How long a connection may take to send a whole head, counted from when the server starts
# waiting for it (the connection's accept, or the first byte of a kept-open connection's next
# request), whatever it sends meanwhile.
HEAD_TIMEOUT_S: Final = 10.0
# The most connections whose head is awaited at once; each holds at most a head's bytes.
MAX_WAITING_HEADS: Final = 1024
# How long a refused connection's further bytes are read and dropped before it is closed.
LINGER_S: Final = 1.0
_READ_BYTES: Final = 64 * 1024
_BUFFER_BYTES: Final = 8192
_ENDS_OF_HEAD: Final = (b"\r\n\r\n", b"\n\n")


def http_reply(protocol: str, reply: Reply, *, close: bool) -> bytes:
    """A reply in the API's JSON error shape as the bytes of an HTTP response."""
    body = json.dumps(reply.body, separators=(",", ":")).encode()
    lines = [
        f"{protocol} {reply.status} {HTTPStatus(reply.status).phrase}",
        f"Content-Length: {len(body)}",
        "Content-Type: application/json",
        *(f"{name}: {value}" for name, value in reply.headers.items()),
        *(["Connection: close"] if close else []),
    ]
    return "".join(f"{line}\r\n" for line in lines).encode("latin-1") + b"\r\n" + body


def head_end(head: bytes | bytearray) -> int:
    """Where the head ends (the offset past its blank line), or -1 while it has not ended.
    Blank lines before the request line are not its end."""
    start = len(head) - len(head.lstrip(b"\r\n"))
    ends = [(at, mark) for mark in _ENDS_OF_HEAD if (at := head.find(mark, start)) >= 0]
    if not ends:
        return -1
    at, mark = min(ends)
    return at + len(mark)


class _HeadThenSocket(socket.SocketIO):
    """A socket's reading side that first gives back the bytes the gate already read."""

    def __init__(self, sock: socket.socket, head: bytes) -> None:
        super().__init__(sock, "rb")
        self._head = memoryview(head)

    def readinto(self, b: memoryview | bytearray) -> int | None:  # type: ignore[override]
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        return super().readinto(b)


class _HeadFirstReader(makefile.StreamReader):
    """cheroot's reader of a connection, starting with the head the gate read. Its buffer holds
    the whole head, so what it has buffered is all that was read from the socket."""

    def __init__(self, sock: socket.socket, head: bytes) -> None:
        # StreamReader's own __init__ opens a plain reader of the socket: its base's, then.
        super(makefile.StreamReader, self).__init__(
            _HeadThenSocket(sock, head), max(_BUFFER_BYTES, len(head))
        )
        self.bytes_read = 0


@dataclass
class _Waiting:
    conn: server.HTTPConnection
    deadline: float
    head: bytearray = field(default_factory=bytearray)
    # Refused: what the client still sends is read and dropped until the deadline.
    draining: bool = False


class HeadGate:
    """The thread that awaits the heads of an HTTP server's connections and hands each
    connection whose head is whole to ``dispatch`` (the server's request threads)."""

    def __init__(self, protocol: str, dispatch: Callable[[server.HTTPConnection], None]) -> None:
        self._protocol = protocol
        self._dispatch = dispatch
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._arrived: list[server.HTTPConnection] = []
        self._waiting: dict[int, _Waiting] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="fq-api-heads", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, conn: server.HTTPConnection) -> None:
        """Await the head of ``conn``'s next request (from any thread)."""
        with self._lock:
            accepted = not self._stopped
            if accepted:
                self._arrived.append(conn)
        if not accepted:
            conn.close()
            return
        self._wake()

    def stop(self) -> None:
        """Close every connection still awaited and end the thread; once."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._wake()
        if self._thread.is_alive():
            self._thread.join()
        for waiting in self._waiting.values():
            waiting.conn.close()
        for conn in self._arrived:
            conn.close()
        self._waiting.clear()
        self._arrived.clear()
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()

    def _wake(self) -> None:
        # A full wake-up socket means the gate has wake-ups pending already.
        with contextlib.suppress(BlockingIOError):
            self._wake_write.send(b"\0")

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopped:
                    return
                arrived, self._arrived = self._arrived, []
            for conn in arrived:
                self._admit(conn)
            for key, _ in self._selector.select(self._wait_s()):
                if key.data is None:
                    self._drain_wake_ups()
                else:
                    self._read(key.data)
            self._expire(time.monotonic())

    def _wait_s(self) -> float:
        if not self._waiting:
            return 1.0
        soonest = min(w.deadline for w in self._waiting.values())
        return max(0.0, min(1.0, soonest - time.monotonic()))

    def _drain_wake_ups(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _admit(self, conn: server.HTTPConnection) -> None:
        # A kept-open connection may have the start of its next request read already.
        rfile = conn.rfile
        head = bytearray(rfile.read1(MAX_HEAD_BYTES) if rfile.has_data() else b"")
        waiting = _Waiting(conn, time.monotonic() + HEAD_TIMEOUT_S, head)
        if len(self._waiting) >= MAX_WAITING_HEADS:
            log.warning("%d connections await their head: one more is refused", len(self._waiting))
            self._refuse(waiting, error_reply(503, "server_busy", "the server is busy"))
            conn.close()
            return
        if not self._handed_on(waiting):
            self._waiting[conn.socket.fileno()] = waiting
            self._selector.register(conn.socket, selectors.EVENT_READ, waiting)

    def _handed_on(self, waiting: _Waiting) -> bool:
        """Hand the connection on when its head is whole (True); refuse it when the head is
        too large, then it is drained; False while it is still awaited or drained."""
        end = head_end(waiting.head)
        if end < 0 and len(waiting.head) <= MAX_HEAD_BYTES:
            return False
        if end < 0 or end > MAX_HEAD_BYTES:
            too_large = f"the request line and headers are over the limit of {MAX_HEAD_BYTES} bytes"
            self._refuse(waiting, error_reply(431, "request_header_fields_too_large", too_large))
            return False
        self._hand_on(waiting)
        return True

    def _hand_on(self, waiting: _Waiting) -> None:
        conn = waiting.conn
        old, conn.rfile = conn.rfile, _HeadFirstReader(conn.socket, bytes(waiting.head))
        old.close()
        self._dispatch(conn)

    def _read(self, waiting: _Waiting) -> None:
        try:
            data = waiting.conn.socket.recv(_READ_BYTES)
        except OSError:
            self._forget(waiting)
            waiting.conn.close()
            return
        if waiting.draining:
            if not data:
                self._forget(waiting)
                waiting.conn.close()
            return
        if not data:
            # The client stopped sending: cheroot answers what it sent, or closes.
            self._forget(waiting)
            if waiting.head:
                self._hand_on(waiting)
            else:
                waiting.conn.close()
            return
        waiting.head += data
        if self._handed_on(waiting):
            self._forget(waiting)

    def _expire(self, now: float) -> None:
        for waiting in [w for w in self._waiting.values() if w.deadline <= now]:
            if waiting.draining or not waiting.head:
                self._forget(waiting)
                waiting.conn.close()
                continue
            self._refuse(
                waiting,
                error_reply(
                    408,
                    "request_timeout",
                    f"the request line and headers did not arrive within {HEAD_TIMEOUT_S:g} s",
                ),
            )

    def _refuse(self, waiting: _Waiting, reply: Reply) -> None:
        """Answer with ``reply`` and keep reading (and dropping) for ``LINGER_S``."""
        waiting.head = bytearray()
        waiting.draining = True
        waiting.deadline = time.monotonic() + LINGER_S
        sock = waiting.conn.socket
        try:
            sock.send(http_reply(self._protocol, reply, close=True))
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client went away: nothing to answer

    def _forget(self, waiting: _Waiting) -> None:
        """No longer await the connection (before it is closed or handed on)."""
        if self._waiting.pop(waiting.conn.socket.fileno(), None) is not None:
            self._selector.unregister(waiting.conn.socket)
