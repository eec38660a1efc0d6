"""The local API in a process of its own (support/api_fuzz_server.py), for the tests that talk
to it over real sockets: started with a signing key, outside production, and stopped after."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fairqueue import api

SUPPORT = Path(__file__).resolve().parent


@contextmanager
def api_process(
    dsn: str, folder: Path, secret: str, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The server process and its port, once it listens; its log is ``folder/server.log``."""
    port_file = folder / "port"
    env = {
        **os.environ,
        api.SIGNING_KEY_ENV: secret,
        "PYTHONPATH": str(SUPPORT.parent),
        **(extra_env or {}),
    }
    env.pop("FAIRQUEUE_ENV", None)
    log = folder / "server.log"
    with log.open("w") as server_log:
        process = subprocess.Popen(
            [sys.executable, str(SUPPORT / "api_fuzz_server.py"), dsn, str(port_file)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=server_log,
        )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.05)
        yield process, int(port_file.read_text())
    finally:
        process.terminate()
        process.wait(timeout=30)
