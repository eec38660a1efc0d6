"""`python -m bench --smoke` runs every workload at tiny sizes against the test's database.

Only the shape of the results is checked (every section there, every figure positive): timings
on a shared CI machine say nothing, so none is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def run_smoke(dsn: str, out: Path) -> str:
    """The real entry point, as `make bench` runs it, with --smoke in the test's database."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--dsn", dsn, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_smoke_run_has_every_section_with_positive_numbers(admin_dsn: str, tmp_path: Path) -> None:
    # The bench builds its own tables beside fairqueue's, so it runs as the superuser.
    stdout = run_smoke(admin_dsn, tmp_path)
    for heading in ("| machine |", "### Throughput", "### Claim latency"):
        assert heading in stdout
    for loop in ("fairqueue run_pipeline", "bare SKIP LOCKED loop", "bare loop on fairqueue.jobs"):
        assert loop in stdout
    assert (tmp_path / "latest.md").read_text(encoding="utf-8").strip() == stdout.strip()
    results = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert results["mode"] == "smoke"
    check_machine(results["machine"])
    check_throughput(results["throughput"], results["sizes"])
    check_latency(results["claim_latency"], results["sizes"])


def check_machine(found: dict[str, Any]) -> None:
    assert found["nproc"] > 0
    assert found["memory_gib"] > 0
    for key in ("postgres", "python", "date"):
        assert found[key], key


def check_throughput(rows: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    seen = {(r["loop"], r["invocations"]) for r in rows}
    loops = ("fairqueue", "bare", "bare_jobs")
    assert seen == {(loop, n) for loop in loops for n in sizes["invocations"]}
    assert {n for _, n in seen} >= {1, 2}
    for row in rows:
        assert row["done"] == row["jobs"] == sizes["throughput_jobs"]
        assert row["claimed"] == row["done"]
        for key in ("seconds", "claimed_per_s", "completed_per_s", "ratio_to_bare"):
            assert row[key] > 0, (row["loop"], key)
        if row["loop"] == "fairqueue":
            assert 0 < row["completion_share"] <= 1


def check_latency(cases: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    assert [c["history"] for c in cases] == [*sizes["histories"], sizes["expired_history"]]
    for case in cases:
        assert case["samples"] == sizes["samples"]
        assert case["served_rows"] > 0
        assert case["served_drift"] == 0  # the counter agrees with a recount of the jobs
        for key in ("p50_ms", "p99_ms", "p50_ratio_to_baseline", "p99_ratio_to_baseline"):
            assert case[key] > 0, (case["history"], key)
    expired = cases[-1]
    assert expired["expired_rows"] == sizes["expired_history"]
    assert expired["first_claim_ms"] > 0
