"""The local server's HTTP: connections kept open between requests, more clients than request
threads, the HTTP server's own refusals in the API's JSON, a shutdown that does not wait for
clients that keep a connection open and send nothing; and its pool's check of idle
connections."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import pytest

from fairqueue import api
from fairqueue.api.server import REQUEST_TIMEOUT_S
from fairqueue.db import Connection
from support import api_support
from support.api_support import running

SECRET = "test-secret-of-the-local-api-0123456789"


@pytest.fixture(autouse=True)
def _api_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(api.SIGNING_KEY_ENV, SECRET)
    for name in ("FAIRQUEUE_TENANT_CLAIM", "FAIRQUEUE_LANE_CLAIM", "FAIRQUEUE_MAX_PAYLOAD_BYTES"):
        monkeypatch.delenv(name, raising=False)
    api_support.reset()


def serving(dsn: str, pool_size: int | None = None) -> AbstractContextManager[api.ApiServer]:
    return running(api.ApiServer(("127.0.0.1", 0), dsn, secret=SECRET, pool_size=pool_size))


def token(lane: str) -> str:
    return api.mint_token(SECRET, tenant_id="acme", lane=lane)


def admit(client: http.client.HTTPConnection, lane: str, n: int) -> tuple[int, int, Any]:
    """One admission on the client's connection: status, HTTP version, body."""
    body = json.dumps({"type": "api_analyze", "payload": {"doc": f"{lane}-{n}"}})
    headers = {"Authorization": f"Bearer {token(lane)}", "Content-Type": "application/json"}
    client.request("POST", "/jobs", body=body, headers=headers)
    response = client.getresponse()
    return response.status, response.version, json.loads(response.read())


def admitted(conn: Connection) -> list[tuple[str, str]]:
    rows = conn.execute(
        "select lane, payload->>'doc' as doc from fairqueue.jobs order by lane, created_at"
    ).fetchall()
    return [(r["lane"], r["doc"]) for r in rows]


def test_a_client_sends_its_requests_over_one_kept_open_connection(
    dsn: str, conn: Connection
) -> None:
    with serving(dsn) as server:
        client = http.client.HTTPConnection(*server.server_address, timeout=10)
        answers = []
        sockets = set()
        for n in range(5):
            answers.append(admit(client, "alice", n))
            assert client.sock is not None, "the server closed the connection"
            sockets.add(id(client.sock))
        client.close()
    assert len(sockets) == 1
    assert [(status, version) for status, version, _ in answers] == [(202, 11)] * 5
    assert [body["place"] for _, _, body in answers] == [1, 2, 3, 4, 5]
    assert admitted(conn) == [("alice", f"alice-{n}") for n in range(5)]


def test_more_clients_than_request_threads_are_each_answered_once(
    dsn: str, conn: Connection
) -> None:
    clients, each = 8, 5
    answers: dict[str, list[tuple[int, int, Any]]] = {}
    failures: list[BaseException] = []

    def one_client(server: api.ApiServer, lane: str) -> None:
        client = http.client.HTTPConnection(*server.server_address, timeout=30)
        try:
            answers[lane] = [admit(client, lane, n) for n in range(each)]
        except BaseException as exc:
            failures.append(exc)
        finally:
            client.close()

    with serving(dsn, pool_size=2) as server:
        threads = [
            threading.Thread(target=one_client, args=(server, f"user-{k}")) for k in range(clients)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert failures == []
    assert sorted(answers) == sorted(f"user-{k}" for k in range(clients))
    for lane, found in answers.items():
        assert [(status, body["lane"], body["place"]) for status, _, body in found] == [
            (202, lane, n + 1) for n in range(each)
        ]
    ids = [body["id"] for found in answers.values() for _, _, body in found]
    assert len(set(ids)) == clients * each
    assert sorted(admitted(conn)) == sorted(
        (f"user-{k}", f"user-{k}-{n}") for k in range(clients) for n in range(each)
    )


def raw_request(server: api.ApiServer, request: bytes) -> tuple[int, dict[str, str], Any]:
    """Send bytes as they are; the status, the headers and the JSON body of the answer."""
    with socket.create_connection(server.server_address, timeout=10) as raw:
        raw.sendall(request)
        raw.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value.strip()
        for name, _, value in (line.partition(":") for line in header_lines)
    }
    return int(status_line.split(" ")[1]), headers, json.loads(body)


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /jobs HTTP/2.0\r\n\r\n", 505, "http_version_not_supported"),
        (b"get /jobs HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed_request"),
        (b"GET /jobs\r\n\r\n", 400, "malformed_request"),
        (b"GET /jobs HTTP/1.1\nHost: x\n\n", 400, "malformed_request"),
        (b"CONNECT /queues HTTP/1.1\r\nHost: x\r\n\r\n", 404, "not_found"),
        (b"CONNECT /jobs HTTP/1.1\r\nHost: x\r\n\r\n", 405, "method_not_allowed"),
    ],
)
def test_what_the_http_server_refuses_itself_is_json_in_the_apis_shape(
    dsn: str, request_bytes: bytes, status: int, code: str
) -> None:
    with serving(dsn) as server:
        found_status, headers, body = raw_request(server, request_bytes)
    assert (found_status, body["error"]["code"]) == (status, code), body
    assert headers["content-type"] == "application/json"
    assert body["error"]["message"]
    if status == 405:
        assert headers["allow"] == "GET, POST"


def test_shutdown_closes_connections_kept_open_without_waiting_for_them(dsn: str) -> None:
    with serving(dsn) as server:
        client = http.client.HTTPConnection(*server.server_address, timeout=30)
        assert admit(client, "alice", 0)[0] == 202
        idle = client.sock
        assert idle is not None
        stopping = threading.Thread(target=server.shutdown)
        stopping.start()
        # A shutdown that waited for the idle client would take the whole request timeout.
        stopping.join(timeout=REQUEST_TIMEOUT_S / 2)
        assert not stopping.is_alive()
        assert idle.recv(1) == b"", "the kept-open connection was not closed"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(server.server_address, timeout=5).close()
        client.close()


def kill_its_idle_connection(connections: api.ApiConnections, conn: Connection) -> int:
    """Use the pool's one connection, give it back, kill its backend and wait until it is gone;
    the backend's pid."""
    with connections.connection() as pooled:
        killed = pooled.info.backend_pid
    conn.execute("select pg_terminate_backend(%s)", [killed])
    deadline = time.monotonic() + 30
    while conn.execute("select 1 from pg_stat_activity where pid = %s", [killed]).fetchone():
        assert time.monotonic() < deadline, f"backend {killed} never went away"
        time.sleep(0.02)
    return killed


def test_a_connection_killed_while_idle_past_the_window_is_replaced_unseen(
    dsn: str, conn: Connection
) -> None:
    connections = api.ApiConnections(dsn, 1, check_after_idle_s=0.0)
    try:
        killed = kill_its_idle_connection(connections, conn)
        with connections.connection() as pooled:
            assert pooled.execute("select 1 as one").fetchone() == {"one": 1}
            assert pooled.info.backend_pid != killed
    finally:
        connections.close()


def test_a_connection_killed_within_the_window_fails_one_request_then_is_replaced(
    dsn: str, conn: Connection
) -> None:
    connections = api.ApiConnections(dsn, 1, check_after_idle_s=3600.0)
    try:
        killed = kill_its_idle_connection(connections, conn)
        with pytest.raises(psycopg.OperationalError), connections.connection() as pooled:
            pooled.execute("select 1")
        with connections.connection() as pooled:
            assert pooled.execute("select 1 as one").fetchone() == {"one": 1}
            assert pooled.info.backend_pid != killed
    finally:
        connections.close()
