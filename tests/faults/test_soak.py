"""The soak (make soak) at a small size: its figures come out, and come out clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[1] / "support" / "soak.py"


@pytest.mark.timeout(240)
def test_the_soak_runs_faults_and_reports_nothing_lost() -> None:
    finished = subprocess.run(
        [
            sys.executable,
            str(SOAK),
            *("--jobs", "800", "--minutes", "0.4", "--handler-ms", "5", "--seed", "11"),
            *("--min-faults", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=220,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    figures = dict(
        line.rsplit(maxsplit=1) for line in finished.stdout.splitlines() if line[-1:].isdigit()
    )
    figures = {name.strip(): int(value.replace(",", "")) for name, value in figures.items()}
    assert figures["jobs"] == figures["done"] == 800
    assert figures["lost"] == figures["written twice"] == figures["runs left open"] == 0
    assert figures["faults"] >= 1
    assert finished.stdout.rstrip().endswith("support.soak: passed")
