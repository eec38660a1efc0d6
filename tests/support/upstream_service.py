"""A stand-in for an upstream service: a real HTTP server on loopback that speaks the upstream
protocol (fairqueue.upstream), its held work kept in memory."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeService:
    """A real HTTP server speaking the upstream protocol, with its state in memory."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, Any]] = {}
        self.release_status = 200
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.headers: list[str | None] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                service.calls.append((self.path, body))
                service.headers.append(self.headers.get("Authorization"))
                status, answer = service.answer(self.path, body)
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/v1/work":
            if body["payload"].get("doc") == "bad":
                return 422, {"error": "doc 'bad' is not a document"}
            if body["payload"].get("doc") == "boom":
                return 500, {"error": "database on fire"}
            work_id = f"w-{len(self.held) + 1}"
            self.held[work_id] = {**body, "released": False}
            return 201, {"id": work_id}
        if path.startswith("/v1/work/") and path.endswith("/release"):
            work_id = path.split("/")[3]
            if self.release_status == 200:
                if self.held[work_id]["released"]:
                    return 409, {"error": "already released"}
                self.held[work_id]["released"] = True
            return self.release_status, {}
        return 404, {"error": "no such route"}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
