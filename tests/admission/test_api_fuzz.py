"""schemathesis against the admission API: every check, every phase (stateful included, over
the document's links), a fixed seed and a bounded time. Any request the served document allows
must be answered as the document says; any it forbids must be refused; nothing may be a 500."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairqueue import api, connect
from fairqueue.lanes import add_credits
from support.api_process import api_process

SECRET = "fuzz-secret-of-the-local-api-0123456789ab"
SEED = 20261201
FUZZ_SECONDS = 40


@pytest.fixture
def fuzzed_api(dsn: str, tmp_path: Path) -> Iterator[str]:
    with connect(dsn, autocommit=True) as app:
        add_credits(app, "acme", 10_000_000)
    with api_process(dsn, tmp_path, SECRET, {"FAIRQUEUE_MAX_PAYLOAD_BYTES": "65536"}) as (_, port):
        yield f"http://127.0.0.1:{port}"


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
