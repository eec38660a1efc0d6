"""The ``fairqueue`` command, run in-process against the test's database."""

from __future__ import annotations

import gc
import io
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.cli import RUN_COLUMNS, main
from fairqueue.db import Connection
from fairqueue.migrate import migrations
from fairqueue.plans import PLANS
from support import cron_stages
from support.databases import scratch_database
from support.rows import count, count_all, runs

STAGES = "support.cron_stages:CLI_STAGES"
UUID_LINE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only --database-url says where the database is; FAIRQUEUE_* from the shell do not leak in."""
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_ENV", "FAIRQUEUE_MAX_PAYLOAD_BYTES"):
        monkeypatch.delenv(name, raising=False)
    cron_stages.reset()


def test_plans_prints_every_plan_and_the_no_tenant_row(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plans"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["plan", "priority", "weight"]
    body = {line.split()[0]: line for line in lines[2:]}
    for name in ("free", "pro", "team"):
        assert name in body
        assert str(PLANS.get(name).priority) in body[name].split()
    (no_tenant,) = [line for line in lines if line.startswith("(no tenant)")]
    assert f"ranks as {PLANS.middle.name}" in no_tenant
    # highest priority first
    order = [line.split()[0] for line in lines[2:] if not line.startswith("(")]
    assert order == ["team", "pro", "free"]


def test_migrate_on_a_migrated_database_is_up_to_date(
    admin_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Migrations run as the role that owns the schema, not as the application.
    assert main(["--database-url", admin_dsn, "migrate"]) == 0
    assert capsys.readouterr().out.strip() == "up to date"


def test_migrate_as_the_application_role_is_one_line_naming_who_can(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", dsn, "migrate"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("fairqueue: this login cannot migrate the database")
    assert "owner or a superuser" in captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_enqueue_prints_the_new_job_id_and_the_row_exists(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "--database-url",
            dsn,
            "enqueue",
            "cli_echo",
            '{"doc": "a"}',
            "--tenant",
            "acme",
            "--group",
            "acme/docs",
            "--stages",
            STAGES,
        ]
    )
    assert code == 0
    out = capsys.readouterr().out.strip()
    assert UUID_LINE.match(out), out
    row = conn.execute("select * from fairqueue.jobs where id = %s", (UUID(out),)).fetchone()
    assert row is not None
    assert (row["type"], row["payload"], row["status"]) == ("cli_echo", {"doc": "a"}, "pending")
    assert (row["tenant_id"], row["group_id"]) == ("acme", "acme/docs")


def test_enqueue_the_same_dedupe_key_twice_says_deduplicated(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "--database-url",
        dsn,
        "enqueue",
        "cli_echo",
        "{}",
        "--dedupe-key",
        "k",
        "--stages",
        STAGES,
    ]
    assert main(argv) == 0
    assert UUID_LINE.match(capsys.readouterr().out.strip())
    assert main(argv) == 0
    assert "deduplicated" in capsys.readouterr().out
    assert count(conn) == 1


def test_enqueue_an_unknown_type_exits_2_naming_it(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--database-url", dsn, "enqueue", "no_such_type", "{}", "--stages", STAGES])
    assert code == 2
    captured = capsys.readouterr()
    assert "'no_such_type'" in captured.err
    assert "cli_echo" in captured.err  # the known types are listed
    assert captured.out == ""
    assert count(conn) == 0


@pytest.mark.parametrize(
    ("payload", "message"),
    [("{not json", "not valid JSON"), ("[1, 2]", "JSON object"), ('"text"', "JSON object")],
)
def test_enqueue_a_payload_that_is_not_a_json_object_exits_2(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], payload: str, message: str
) -> None:
    code = main(["--database-url", dsn, "enqueue", "cli_echo", payload, "--stages", STAGES])
    assert code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.err.startswith("fairqueue: ")
    assert count(conn) == 0


def test_status_prints_a_header_and_a_row_per_type(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(5):
        assert main(["--database-url", dsn, "enqueue", "cli_echo", "{}", "--stages", STAGES]) == 0
    # One done and one failed, and both moved out of the hot table: still counted.
    conn.execute(
        "update fairqueue.jobs set status = (array['done', 'failed'])[n], finished_at = now()"
        " from (select id, row_number() over (order by id) as n from fairqueue.jobs limit 2) f"
        " where fairqueue.jobs.id = f.id"
    )
    assert (
        conn.execute("select fairqueue.move_finished(10, interval '1 s') as n").fetchone()["n"] == 2
    )
    capsys.readouterr()
    assert main(["--database-url", dsn, "status"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "type",
        "queued",
        "backlog",
        "scheduled",
        "running",
        "stuck",
        "failed",
        "done",
    ]
    assert [line.split() for line in lines[1:-1]] == [
        ["cli_echo", "0", "3", "0", "0", "0", "1", "1"]
    ]
    assert lines[-1] == (
        "results missing: 0 within the grace window, 0 under an hour, 0 under a day, 0 older"
    )


def tick(dsn: str) -> tuple[int, list[str]]:
    """`fairqueue tick`, and the ResourceWarnings (unclosed connections) it left behind."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["--database-url", dsn, "tick", "--stages", STAGES])
        gc.collect()
    return code, [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_tick_writes_exactly_one_run(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    for n in range(2):
        argv = ["--database-url", dsn, "enqueue", "cli_echo", f'{{"n": {n}}}', "--stages", STAGES]
        assert main(argv) == 0
    capsys.readouterr()

    code, _ = tick(dsn)  # the leak is test_tick_closes_its_database_connection's business

    assert code == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["stopReason"], answer["jobsDone"], answer["error"]) == ("no_work", 2, None)
    (run,) = runs(conn)
    assert str(run["id"]) == answer["runId"]
    assert (run["trigger"], run["stop_reason"], run["jobs_done"]) == ("schedule", "no_work", 2)
    assert run["finished_at"] is not None
    assert len(cron_stages.seen("cli_echo")) == 2
    assert count_all(conn, "status = 'done'") == 2


def test_tick_closes_its_database_connection(dsn: str, conn: Connection) -> None:
    code, leaked = tick(dsn)
    assert code == 0
    assert len(runs(conn)) == 1
    # A one-shot command must close what it opened; psycopg warns when an open one is dropped.
    assert leaked == []


def test_runs_prints_a_header_and_a_row_per_run(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue(conn, "cli_echo", {})
    run_pipeline(dsn, cron_stages.CLI_STAGES, trigger="manual")
    run_pipeline(dsn, cron_stages.CLI_STAGES, trigger="manual")

    assert main(["--database-url", dsn, "runs"]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == list(RUN_COLUMNS)
    assert [line.split()[2:7] for line in lines[1:]] == [
        ["manual", "no_work", "0", "0", "0"],  # newest first
        ["manual", "no_work", "1", "0", "0"],
    ]


def test_runs_on_an_empty_table_prints_only_the_header(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--database-url", dsn, "runs", "--limit", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("started")


def test_production_without_a_database_url_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    assert main(["status"]) == 2
    captured = capsys.readouterr()
    assert "DATABASE_URL" in captured.err
    assert "production" in captured.err
    assert captured.out == ""


@pytest.fixture
def unmigrated_dsn(server_dsn: str) -> Iterator[str]:
    """A database the migrations never reached."""
    with scratch_database(server_dsn, f"fq_cli_unmigrated_{os.getpid()}") as url:
        yield url


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["runs"],
        ["enqueue", "cli_echo", "{}", "--stages", STAGES],
        ["tick", "--stages", STAGES],
    ],
)
def test_a_database_never_migrated_is_one_line_that_says_migrate_and_exit_2(
    unmigrated_dsn: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main(["--database-url", unmigrated_dsn, *command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fairqueue: ")
    assert "fairqueue migrate" in captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_a_database_behind_this_release_is_refused_with_where_it_stands(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # Numbers may skip (each change's migrations take a range of their own).
    before, latest = (m.version for m in migrations()[-2:])
    (removed,) = conn.execute(
        "delete from fairqueue.migrations where version = %s returning *", (latest,)
    ).fetchall()

    assert main(["--database-url", dsn, "status"]) == 2
    err = capsys.readouterr().err
    assert f"at migration {before}" in err
    assert f"needs migration {latest}" in err

    # Once the database has the release's last migration again, the command works.
    conn.execute(
        "insert into fairqueue.migrations (version, name) values (%s, %s)",
        (removed["version"], removed["name"]),
    )
    assert main(["--database-url", dsn, "status"]) == 0


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://fq:s3cret@127.0.0.1/db?colour=blue", '"colour"'),
        ("postgresql://fq:s3%zzret@127.0.0.1/db", '"***"'),
        ("postgresql://fq:s3cret@[127.0.0.1/db", "postgresql://fq:***@[127.0.0.1/db"),
        ("host=127.0.0.1 password=s3cret dbname", '"dbname"'),
    ],
)
@pytest.mark.parametrize("command", [["migrate"], ["status"], ["tick", "--stages", STAGES]])
def test_a_database_url_libpq_cannot_read_is_one_line_without_its_password(
    url: str, named: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main(["--database-url", url, *command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("fairqueue: the database URL is not a connection string")
    assert named in captured.err
    assert "s3" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_database_url_is_taken_after_the_subcommand_too(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["enqueue", "cli_echo", "{}", "--stages", STAGES, "--database-url", dsn])
    assert code == 0
    assert UUID_LINE.match(capsys.readouterr().out.strip())
    assert count(conn) == 1
    assert main(["runs", "--database-url", dsn]) == 0
    assert capsys.readouterr().out.startswith("started")


def test_the_payload_comes_from_a_file_with_at(
    dsn: str, conn: Connection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = {"doc": "x" * 300_000}  # more than one argument may carry on Linux (128 KiB)
    payload_file = tmp_path / "payload.json"
    payload_file.write_text(json.dumps(big), encoding="utf-8")
    code = main(
        ["--database-url", dsn, "enqueue", "cli_echo", f"@{payload_file}", "--stages", STAGES]
    )
    assert code == 0, capsys.readouterr().err
    job_id = UUID(capsys.readouterr().out.strip())
    row = conn.execute("select payload from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row is not None and row["payload"] == big


def test_the_payload_comes_from_stdin_with_a_dash(
    dsn: str, conn: Connection, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"doc": "from stdin"}'))
    assert main(["--database-url", dsn, "enqueue", "cli_echo", "-", "--stages", STAGES]) == 0
    job_id = UUID(capsys.readouterr().out.strip())
    row = conn.execute("select payload from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row is not None and row["payload"] == {"doc": "from stdin"}


def test_a_payload_file_that_cannot_be_read_exits_2_naming_it(
    dsn: str, conn: Connection, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.json"
    code = main(["--database-url", dsn, "enqueue", "cli_echo", f"@{missing}", "--stages", STAGES])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot read the payload file" in err and "nowhere.json" in err
    assert count(conn) == 0


@pytest.mark.parametrize("limit", ["0", "-1", "many"])
def test_runs_limit_must_be_a_count(
    dsn: str, capsys: pytest.CaptureFixture[str], limit: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--database-url", dsn, "runs", "--limit", limit])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--limit" in err
    assert "Traceback" not in err


def test_production_help_and_status_need_no_example_stages(
    production_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Production without FAIRQUEUE_UPSTREAM_URL: the example is never loaded, so nothing fails.
    monkeypatch.setenv("FAIRQUEUE_ENV", "production")
    monkeypatch.delenv("FAIRQUEUE_UPSTREAM_URL", raising=False)
    monkeypatch.setenv("DATABASE_URL", production_dsn)
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "enqueue" in capsys.readouterr().out
    assert main(["status"]) == 0
    assert capsys.readouterr().out.startswith("type")


def test_a_token_for_an_empty_tenant_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAIRQUEUE_API_SECRET", "s" * 32)
    assert main(["token", "--tenant", "", "--lane", "me"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "tenant" in captured.err


def test_serve_help_names_every_role(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = capsys.readouterr().out
    for role in ("cron", "worker", "sweeper", "backstop", "api"):
        assert role in out


def test_commands_on_the_embedded_database_leave_one_runtime_folder(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "XDG_RUNTIME_DIR")} | {
        "TMPDIR": str(temp)
    }
    for command in (["migrate"], ["runs"], ["status"]):
        done = subprocess.run(
            [sys.executable, "-m", "fairqueue", *command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert done.returncode == 0, done.stderr
    assert [p.name for p in temp.glob("fairqueue-xdg-*")] == [f"fairqueue-xdg-{os.getuid()}"]


@pytest.mark.timeout(60)
def test_the_installed_command_finds_a_stage_module_in_the_current_folder(
    dsn: str, tmp_path: Path
) -> None:
    # As pip's console script runs it: the script's own folder first on sys.path, not the
    # current one.
    bin_dir, app_dir = tmp_path / "bin", tmp_path / "app"
    bin_dir.mkdir()
    app_dir.mkdir()
    script = bin_dir / "fairqueue"
    script.write_text("import sys\nfrom fairqueue.cli import main\nsys.exit(main())\n")
    (app_dir / "mystages.py").write_text(
        "from fairqueue import Stage\nSTAGES = [Stage('noted', handler=lambda job: None)]\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAIRQUEUE_", "DATABASE_"))}
    command = ["--database-url", dsn, "enqueue", "noted", "{}", "--stages", "mystages:STAGES"]
    done = subprocess.run(
        [sys.executable, str(script), *command],
        cwd=app_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    assert UUID_LINE.match(done.stdout.strip()), done.stdout


def test_tick_logs_its_run_as_json_lines_on_stderr(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    enqueue(conn, "cli_echo", {})
    assert main(["--database-url", dsn, "tick", "--stages", STAGES]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # stdout holds the answer alone
    logged = [json.loads(line) for line in captured.err.splitlines() if line.startswith("{")]
    (run,) = runs(conn)
    assert [(r["message"], r["run_id"]) for r in logged if r["message"].startswith("run ")] == [
        ("run opened", str(run["id"])),
        ("run closed", str(run["id"])),
    ]
    assert all(r["service"] == "fairqueue-tick" for r in logged)


@pytest.mark.parametrize("command", [["plans"], ["status"], ["runs"], ["jobs", "list"]])
def test_a_listing_whose_reader_has_gone_ends_quietly(dsn: str, command: list[str]) -> None:
    # `fairqueue ... | head -1` once head has read its line: every write meets a closed pipe.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fairqueue", "--database-url", dsn, *command],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (128 + signal.SIGPIPE, "")
