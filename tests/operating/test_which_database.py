"""Which database the library and the CLI use when none is named: the embedded Postgres in the
current folder's `.pgdata/` in development, and a refusal in production."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fairqueue import DatabaseUnavailable, Stage, connect, run_pipeline
from fairqueue.db import resolve_dsn

# A fresh clone's first use, in a folder of its own: no DATABASE_URL, so the embedded server
# starts in ./.pgdata, is migrated, takes a job and drains it.
FIRST_USE = textwrap.dedent(
    """
    from fairqueue import Stage, connect, enqueue, migrate, run_pipeline
    from fairqueue.db import resolve_dsn

    stages = [Stage("noted", handler=lambda job: None)]
    with connect() as conn:
        migrate(conn)
        enqueue(conn, "noted", {}, tenant_id="t1")
    result = run_pipeline(None, stages)
    print(resolve_dsn() == resolve_dsn(), result.stop_reason, result.jobs_done)
    """
)


@pytest.mark.timeout(30)
def test_production_refuses_to_guess_a_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    with pytest.raises(DatabaseUnavailable, match="FAIRQUEUE_ENV=production needs a DSN"):
        resolve_dsn()
    with pytest.raises(DatabaseUnavailable, match="FAIRQUEUE_ENV=production needs a DSN"):
        connect()
    with pytest.raises(DatabaseUnavailable, match="FAIRQUEUE_ENV=production needs a DSN"):
        run_pipeline(None, [Stage("nowhere", handler=lambda job: None)])


@pytest.mark.timeout(30)
def test_a_named_database_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch, admin_dsn: str
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/elsewhere")
    assert resolve_dsn(admin_dsn) == admin_dsn
    assert resolve_dsn() == "postgresql://nobody@127.0.0.1:1/elsewhere"


@pytest.mark.timeout(180)
def test_with_no_database_named_development_uses_the_embedded_postgres(tmp_path: Path) -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("FAIRQUEUE_", "DATABASE_"))
    }
    done = subprocess.run(
        [sys.executable, "-c", FIRST_USE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "True no_work 1\n"
    assert done.stderr.count("no DATABASE_URL: using the embedded Postgres in .pgdata/") == 1
    assert (tmp_path / ".pgdata" / "PG_VERSION").is_file()
