"""schemathesis against the admission API: every check, every phase (stateful included, over
the document's links), a fixed seed and a bounded time. Any request the served document allows
must be answered as the document says; any it forbids must be refused; nothing may be a 500."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairqueue import api, connect
from fairqueue.lanes import add_credits

TESTS = Path(__file__).resolve().parents[1]
SECRET = "fuzz-secret-of-the-local-api-0123456789ab"
SEED = 20261201
FUZZ_SECONDS = 40


@pytest.fixture
def fuzzed_api(dsn: str, tmp_path: Path) -> Iterator[str]:
    with connect(dsn, autocommit=True) as app:
        add_credits(app, "acme", 10_000_000)
    port_file = tmp_path / "port"
    env = {
        **os.environ,
        api.SIGNING_KEY_ENV: SECRET,
        "PYTHONPATH": str(TESTS),
        "FAIRQUEUE_MAX_PAYLOAD_BYTES": "65536",
    }
    env.pop("FAIRQUEUE_ENV", None)
    log = tmp_path / "server.log"
    with log.open("w") as server_log:
        server = subprocess.Popen(
            [sys.executable, str(TESTS / "support" / "api_fuzz_server.py"), dsn, str(port_file)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=server_log,
        )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert server.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text()}"
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.timeout(FUZZ_SECONDS + 90)
def test_schemathesis_finds_nothing(fuzzed_api: str, tmp_path: Path) -> None:
    token = api.mint_token(SECRET, tenant_id="acme", lane="alice")
    run = subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "run",
            f"{fuzzed_api}/openapi.json",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--header",
            f"Authorization: Bearer {token}",
            "--seed",
            str(SEED),
            "--max-time",
            str(FUZZ_SECONDS),
            "--workers",
            "1",
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=FUZZ_SECONDS + 60,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false"},
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
