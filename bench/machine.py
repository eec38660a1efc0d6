"""The machine a run measured: hardware, Postgres and its settings, the versions compared."""

from __future__ import annotations

import hashlib
import os
import platform
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import fairqueue
from fairqueue.db import Connection

SETTINGS = ("shared_buffers", "synchronous_commit", "fsync", "jit", "max_connections")
# Every package whose speed the run compares, or that drives a peer.
PACKAGES = ("psycopg", "pgqueuer", "asyncpg", "procrastinate")


@dataclass(frozen=True)
class Machine:
    nproc: int
    memory_gib: float
    cpu: str
    postgres: str
    postgres_settings: dict[str, str]
    server: str
    python: str
    packages: dict[str, str]
    platform: str
    date: str


def _meminfo_gib() -> float:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return 0.0


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _nproc() -> int:
    """What `nproc` prints: the CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 0


def machine(conn: Connection, server: str) -> Machine:
    def setting(name: str) -> str:
        row = conn.execute("select current_setting(%s) as value", (name,)).fetchone()
        assert row is not None
        return str(row["value"])

    return Machine(
        nproc=_nproc(),
        memory_gib=_meminfo_gib(),
        cpu=_cpu_model(),
        postgres=setting("server_version"),
        postgres_settings={name: setting(name) for name in SETTINGS},
        server=server,
        python=platform.python_version(),
        packages={name: version(name) for name in PACKAGES},
        platform=platform.platform(),
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def library_fingerprint() -> str:
    """A digest of the library's code, queries and SQL (migrations and definitions): which
    fairqueue was measured."""
    root = Path(fairqueue.__file__).resolve().parent
    files = [
        *sorted(root.glob("*.py")),
        *sorted((root / "queries").glob("*.sql")),
        *sorted((root / "sql").rglob("*.sql")),
    ]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]
