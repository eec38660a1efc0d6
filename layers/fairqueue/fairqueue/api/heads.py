"""Requests read whole before a request thread sees them.

cheroot hands a connection to one of its few request threads as soon as a byte arrives, and the
thread then reads the request with a timeout that starts again on every read: a client that
trickles a header line (or a body byte) every few seconds holds the thread for as long as it
likes, and a header of any size is read into memory. Here :class:`HeadGate` reads every
connection's request without blocking (a peek when it came in one piece, else a thread of its
own that waits for all such connections at once): its head, and the body when the head declares
its length (``Content-Length`` within the API's body limit, no ``Expect: 100-continue``). Only a
request that has arrived goes on to the request threads. A head is bounded in size
(``MAX_HEAD_BYTES``: 431), a request in total time from when the server starts waiting for it
(``ARRIVAL_TIMEOUT_S``: 408), the connections waiting at once in number
(``MAX_ARRIVING``) and the bytes they hold together (``MAX_ARRIVING_BYTES``): 503 beyond. A
refusal is the API's JSON error; the connection is then shut for writing and what the client
still sends is read and dropped for ``LINGER_S``, so that the client reads the answer rather
than a reset.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from http import HTTPStatus
from typing import Final

from cheroot import makefile, server

from .models import Reply, error_reply

log = logging.getLogger("fairqueue.api")

# The most bytes a request line and its headers may take, blank line included.
MAX_HEAD_BYTES: Final = 64 * 1024
# How long a request may take to arrive (its head, and the body whose length it declares),
# counted from when the server starts waiting for it (the connection's accept, or the first byte
# of a kept-open connection's next request), whatever it sends meanwhile.
ARRIVAL_TIMEOUT_S: Final = 10.0
# The most connections whose request is awaited at once, and the most bytes they hold together.
MAX_ARRIVING: Final = 1024
MAX_ARRIVING_BYTES: Final = 64 * 1024 * 1024
# How long a refused connection's further bytes are read and dropped before it is closed.
LINGER_S: Final = 1.0
_READ_BYTES: Final = 64 * 1024
_BUFFER_BYTES: Final = 8192
_ENDS_OF_HEAD: Final = (b"\r\n\r\n", b"\n\n")
_CONTENT_LENGTH: Final = re.compile(rb"\ncontent-length:[ \t]*([0-9]{1,15})[ \t]*(?=\r?\n)", re.I)
_EXPECT: Final = re.compile(rb"\nexpect:", re.I)


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


def awaited_body(head: bytes | bytearray, limit: int) -> int:
    """How many body bytes to await after ``head``: the length it declares once, within
    ``limit``, unless it asks to be told to send it (``Expect``); else none, and cheroot and
    the API answer as they do."""
    declared = _CONTENT_LENGTH.findall(head)
    if len(declared) != 1 or _EXPECT.search(head):
        return 0
    length = int(declared[0])
    return length if length <= limit else 0


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
    # What has arrived of the request: its head, then its body.
    head: bytearray = field(default_factory=bytearray)
    # The bytes the whole request takes, once its head has ended.
    whole: int = -1
    # Refused: what the client still sends is read and dropped until the deadline.
    draining: bool = False


def whole_request(head: bytes | bytearray, max_body: int) -> int:
    """How many bytes the request at the start of ``head`` takes, or -1 while its head has not
    ended (or is too large to be read)."""
    end = head_end(head)
    if end < 0 or end > MAX_HEAD_BYTES:
        return -1
    return end + awaited_body(head[:end], max_body)


class HeadGate:
    """Awaits the requests of an HTTP server's connections and hands each connection whose
    request has arrived to ``dispatch`` (the server's request threads), restoring its socket's
    ``timeout``; ``max_body`` is the longest body it awaits.

    A request already whole when its connection is put (the common case: it came in one
    packet) goes on at once from the caller's thread; the others wait in the gate's thread.
    """

    def __init__(
        self,
        protocol: str,
        timeout: float,
        dispatch: Callable[[server.HTTPConnection], None],
        max_body: Callable[[], int],
    ) -> None:
        self._protocol = protocol
        self._timeout = timeout
        self._max_body = max_body
        # The bytes the connections awaited hold together.
        self._held = 0
        self._dispatch = dispatch
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._wake_write.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._arrived: list[tuple[server.HTTPConnection, bytearray, float]] = []
        self._waiting: dict[int, _Waiting] = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="fq-api-heads", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, conn: server.HTTPConnection) -> None:
        """Hand ``conn`` on once its next request has arrived (from any thread)."""
        deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
        # The gate reads without waiting; the socket's timeout is back once it is handed on.
        conn.socket.settimeout(0.0)
        # A kept-open connection may have the start of its next request read already. Left
        # where it is when the request is whole: only a peek.
        arrived = conn.rfile.peek(0) if conn.rfile.has_data() else b""
        with contextlib.suppress(OSError):  # nothing yet, or an error the gate meets again
            arrived += conn.socket.recv(_READ_BYTES, socket.MSG_PEEK)
        if 0 <= whole_request(arrived, self._max_body()) <= len(arrived):
            conn.socket.settimeout(self._timeout)
            self._dispatch(conn)
            return
        head = bytearray()
        while conn.rfile.has_data():
            head += conn.rfile.read1(_READ_BYTES)
        with self._lock:
            accepted = not self._stopped
            if accepted:
                self._arrived.append((conn, head, deadline))
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
        for conn, _, _ in self._arrived:
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
            for conn, head, deadline in arrived:
                self._guarded(conn, partial(self._admit, conn, head, deadline))
            for key, _ in self._selector.select(self._wait_s()):
                if key.data is None:
                    self._drain_wake_ups()
                else:
                    waiting: _Waiting = key.data
                    self._guarded(waiting.conn, partial(self._read, waiting))
            self._expire(time.monotonic())

    def _guarded(self, conn: server.HTTPConnection, step: Callable[[], None]) -> None:
        """One connection's step; one that fails unexpectedly loses that connection only, not
        the gate."""
        try:
            step()
        except Exception:
            log.exception("the request gate failed on a connection; closing it")
            waiting = self._waiting.pop(conn.socket.fileno(), None)
            if waiting is not None:
                self._held -= len(waiting.head)
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(conn.socket)
            conn.close()

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

    def _admit(self, conn: server.HTTPConnection, head: bytearray, deadline: float) -> None:
        if len(self._waiting) >= MAX_ARRIVING:
            log.warning("%d requests are arriving: one more is refused", len(self._waiting))
            self._answer(conn, _BUSY)
            conn.close()
            return
        waiting = _Waiting(conn, deadline, head)
        self._held += len(head)
        self._waiting[conn.socket.fileno()] = waiting
        self._selector.register(conn.socket, selectors.EVENT_READ, waiting)
        self._settle(waiting)

    def _settle(self, waiting: _Waiting) -> None:
        """Hand the connection on once its request has arrived; refuse a head too large, or a
        request that would take the gate past its bytes."""
        if waiting.whole < 0:
            waiting.whole = whole_request(waiting.head, self._max_body())
            if waiting.whole < 0:
                if len(waiting.head) > MAX_HEAD_BYTES:
                    self._refuse(waiting, _HEAD_TOO_LARGE)
                return
        if len(waiting.head) >= waiting.whole:
            self._forget(waiting)
            self._hand_on(waiting.conn, waiting.head)
        elif self._held > MAX_ARRIVING_BYTES:
            log.warning("arriving requests hold %d bytes: one is refused", self._held)
            self._refuse(waiting, _BUSY)

    def _hand_on(self, conn: server.HTTPConnection, arrived: bytearray) -> None:
        conn.socket.settimeout(self._timeout)
        old, conn.rfile = conn.rfile, _HeadFirstReader(conn.socket, bytes(arrived))
        old.close()
        self._dispatch(conn)

    def _read(self, waiting: _Waiting) -> None:
        try:
            data = waiting.conn.socket.recv(_READ_BYTES)
        except BlockingIOError:
            return  # woken for nothing
        except OSError:
            data, waiting.draining = b"", True
        if not data and (waiting.draining or not waiting.head):
            self._forget(waiting)
            waiting.conn.close()
        elif not data:
            # The client stopped sending: cheroot answers what it sent, or closes.
            waiting.whole = len(waiting.head)
            self._settle(waiting)
        elif not waiting.draining:
            waiting.head += data
            self._held += len(data)
            self._settle(waiting)

    def _expire(self, now: float) -> None:
        for waiting in [w for w in self._waiting.values() if w.deadline <= now]:
            if waiting.draining or not waiting.head:
                self._forget(waiting)
                waiting.conn.close()
            else:
                self._refuse(waiting, _TOO_SLOW)

    def _refuse(self, waiting: _Waiting, reply: Reply) -> None:
        """Answer with ``reply`` and keep reading (and dropping) for ``LINGER_S``."""
        self._held -= len(waiting.head)
        waiting.head = bytearray()
        waiting.draining = True
        waiting.deadline = time.monotonic() + LINGER_S
        self._answer(waiting.conn, reply)

    def _answer(self, conn: server.HTTPConnection, reply: Reply) -> None:
        """Send ``reply`` and shut the connection for writing."""
        try:
            conn.socket.send(http_reply(self._protocol, reply, close=True))
            conn.socket.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the client went away: nothing to answer

    def _forget(self, waiting: _Waiting) -> None:
        """No longer await the connection (before it is closed or handed on)."""
        if self._waiting.pop(waiting.conn.socket.fileno(), None) is not None:
            self._selector.unregister(waiting.conn.socket)
            self._held -= len(waiting.head)


_BUSY: Final = error_reply(503, "server_busy", "the server is busy; retry later")
_HEAD_TOO_LARGE: Final = error_reply(
    431,
    "request_header_fields_too_large",
    f"the request line and headers are over the limit of {MAX_HEAD_BYTES} bytes",
)
_TOO_SLOW: Final = error_reply(
    408, "request_timeout", f"the request did not arrive within {ARRIVAL_TIMEOUT_S:g} s"
)
