"""The local API against hostile clients, on a server in a process of its own: request heads
bounded in size (431) and requests in total time (408), so that neither huge heads nor heads or
bodies trickled a piece at a time starve the request threads or the memory."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fairqueue import api
from fairqueue.api.heads import (
    ARRIVAL_TIMEOUT_S,
    LINGER_S,
    MAX_HEAD_BYTES,
    awaited_body,
    head_end,
)
from support.api_process import api_process

SECRET = "hostile-secret-of-the-local-api-0123456789"
MIB = 1024 * 1024


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    address: tuple[str, int]

    def memory_kib(self, field: str) -> int:
        """A VmRSS or VmHWM line of the server's /proc status, in KiB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in the server's status")

    def reset_peak_memory(self) -> None:
        # "5" resets the peak resident set size (VmHWM) to the current one.
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")


@pytest.fixture
def server(dsn: str, tmp_path: Path) -> Iterator[ServerProcess]:
    with api_process(dsn, tmp_path, SECRET) as (process, port):
        yield ServerProcess(process, ("127.0.0.1", port))


def parsed(received: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    return int(status_line.split(" ")[1]), headers, json.loads(body)


def read_answer(sock: socket.socket) -> bytes:
    """What the server sent until it closed (a reset after its answer ends it too)."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def ordinary_request(address: tuple[str, int]) -> tuple[int, float]:
    """An authenticated GET of a job that does not exist, on a connection of its own: its status
    and how long the answer took."""
    token = api.mint_token(SECRET, tenant_id="acme", lane="alice")
    request = (
        f"GET /jobs/{uuid.uuid4()} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(request)
        status, _, _ = parsed(read_answer(sock))
    return status, time.monotonic() - started


def huge_head(address: tuple[str, int], header_bytes: int) -> bytes:
    """Send a request whose one header is ``header_bytes`` long; what the server answered."""
    sock = socket.create_connection(address, timeout=30)

    def send() -> None:
        try:
            sock.sendall(b"GET /jobs HTTP/1.1\r\nHost: x\r\nX-Huge: ")
            chunk = b"a" * MIB
            for _ in range(header_bytes // MIB):
                sock.sendall(chunk)
            sock.sendall(b"\r\n\r\n")
        except OSError:
            pass  # the server stopped reading: it has answered

    sender = threading.Thread(target=send)
    sender.start()
    try:
        return read_answer(sock)
    finally:
        sock.close()
        sender.join(timeout=30)


def test_head_end_finds_the_blank_line_after_the_request_line() -> None:
    assert head_end(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody") == 27
    assert head_end(b"GET / HTTP/1.1\nHost: x\n\n") == 24
    assert head_end(b"GET / HTTP/1.1\r\nHost: x\r\n") == -1
    assert head_end(b"\r\n\r\n") == -1  # blank lines before a request line are no head
    assert head_end(b"\r\nGET / HTTP/1.1\r\n\r\n") == 20


@pytest.mark.timeout(120)
def test_ten_heads_of_32_mib_at_once_get_431_and_the_memory_stays_bounded(
    server: ServerProcess,
) -> None:
    assert ordinary_request(server.address)[0] == 404  # warmed up
    before_kib = server.memory_kib("VmRSS")
    server.reset_peak_memory()
    answers: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: answers.append(huge_head(server.address, 32 * MIB)))
        for _ in range(10)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    peak_kib = server.memory_kib("VmHWM")

    assert len(answers) == 10
    for answer in answers:
        status, headers, body = parsed(answer)
        assert (status, body["error"]["code"]) == (431, "request_header_fields_too_large")
        assert str(MAX_HEAD_BYTES) in body["error"]["message"]
        assert (headers["content-type"], headers["connection"]) == ("application/json", "close")
    assert (peak_kib - before_kib) * 1024 < 64 * MIB, (before_kib, peak_kib)
    assert ordinary_request(server.address)[0] == 404


def test_a_head_just_under_the_limit_is_answered_and_just_over_is_431(
    server: ServerProcess,
) -> None:
    start = b"GET /jobs HTTP/1.1\r\nHost: x\r\nX-Big: "
    for size, status in ((MAX_HEAD_BYTES, 401), (MAX_HEAD_BYTES + 1, 431)):
        padding = b"a" * (size - len(start) - 4)
        with socket.create_connection(server.address, timeout=10) as sock:
            sock.sendall(start + padding + b"\r\n\r\n")
            found, _, body = parsed(read_answer_once(sock))
        assert found == status, body


def read_answer_once(sock: socket.socket) -> bytes:
    """One answer on a connection the server may keep open: its head and its declared body."""
    received = b""
    while (end := head_end(received)) < 0:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {received!r}"
        received += chunk
    _, headers, _ = parsed(received[:end] + b"{}")
    length = int(headers["content-length"])
    while len(received) < end + length:
        received += sock.recv(65536)
    return received[: end + length]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("trickled", ["head", "body"])
def test_twelve_slow_requests_hold_no_request_thread_and_are_cut_off_in_total_time(
    server: ServerProcess, trickled: str
) -> None:
    slow_answers: dict[int, tuple[bytes, float]] = {}
    token = api.mint_token(SECRET, tenant_id="acme", lane="mallory")
    if trickled == "head":
        start, piece = b"GET /jobs HTTP/1.1\r\n", "X-Slow-{n}: {line}\r\n"
    else:
        start = (
            f"POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        ).encode()
        piece = " "

    def trickle(n: int) -> None:
        """A piece a second, until the server answers."""
        with socket.create_connection(server.address, timeout=30) as sock:
            started = time.monotonic()
            sock.sendall(start)
            line = 0
            while not select.select([sock], [], [], 1.0)[0]:
                line += 1
                try:
                    sock.sendall(piece.format(n=n, line=line).encode())
                except OSError:
                    break
            slow_answers[n] = (read_answer(sock), time.monotonic() - started)

    slow = [threading.Thread(target=trickle, args=(n,)) for n in range(12)]
    for thread in slow:
        thread.start()
    time.sleep(0.5)  # every slow client has sent its first piece
    ordinary: list[tuple[int, float]] = []
    until = time.monotonic() + ARRIVAL_TIMEOUT_S + 1
    while time.monotonic() < until:
        ordinary.append(ordinary_request(server.address))
        time.sleep(0.5)
    for thread in slow:
        thread.join(timeout=30)

    assert len(ordinary) >= 15
    assert [status for status, _ in ordinary] == [404] * len(ordinary)
    assert max(took for _, took in ordinary) < 2.0, ordinary
    assert sorted(slow_answers) == list(range(12))
    for answer, took in slow_answers.values():
        status, _, body = parsed(answer)
        assert (status, body["error"]["code"]) == (408, "request_timeout")
        assert ARRIVAL_TIMEOUT_S - 0.5 < took < ARRIVAL_TIMEOUT_S + LINGER_S + 2.0


def test_the_body_awaited_is_the_one_declared_within_the_limit() -> None:
    head = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n"
    assert awaited_body(head, 100) == 12
    assert awaited_body(head.replace(b"Content-Length", b"content-LENGTH"), 100) == 12
    assert awaited_body(head, 11) == 0  # over the limit: the API refuses it unread
    assert awaited_body(head.replace(b"\r\n\r\n", b"\r\nContent-Length: 12\r\n\r\n"), 100) == 0
    assert awaited_body(head.replace(b"Host", b"Expect: 100-continue\r\nHost"), 100) == 0
    assert awaited_body(b"GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n", 100) == 0
