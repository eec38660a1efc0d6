"""``fairqueue schedules`` and what ``jobs show`` says of a tick's job, run in-process against
the test's database."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fairqueue import add_schedule, connect, get_schedule
from fairqueue.cli import main
from fairqueue.cli.schedules import COLUMNS, NO_SCHEDULES
from fairqueue.roles.scheduling import sweep_schedules
from support.schedule_stages import TICK

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_ENV", "FAIRQUEUE_SCHEDULES"):
        monkeypatch.delenv(name, raising=False)


def run(capsys: pytest.CaptureFixture[str], dsn: str, *args: str) -> tuple[int, str, str]:
    status = main(["--database-url", dsn, "schedules", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_list_show_pause_resume_remove(capsys, dsn, conn) -> None:
    assert TICK.name == "tick"
    # Listing is the default.
    status, out, _ = run(capsys, dsn)
    assert status == 0 and out.splitlines()[0].split() == " ".join(COLUMNS).split()
    status, out, _ = run(capsys, dsn, "list")
    assert status == 0 and NO_SCHEDULES in out

    with connect(dsn, autocommit=True) as app:
        add_schedule(
            app,
            "nightly",
            "tick",
            cron="30 2 * * *",
            timezone="Europe/Berlin",
            tenant_id="acme",
            catch_up="all",
        )
        add_schedule(app, "often", "tick", every=timedelta(minutes=5))
    conn.execute(
        "update fairqueue.schedules set next_tick_at = date_trunc('minute', now())"
        " - interval '5 minutes' where name = 'often'"
    )
    with connect(dsn, autocommit=True) as app:
        sweep_schedules(app, None)
        often = get_schedule(app, "often")

    status, out, _ = run(capsys, dsn, "list")
    lines = out.splitlines()
    assert status == 0 and lines[0].split()[:3] == ["tenant", "name", "type"]
    assert lines[2].split()[:4] == ["(none)", "often", "tick", "every"]
    assert f"{often.last_job_id} (pending)" in lines[2]
    assert "cron 30 2 * * * Europe/Berlin" in lines[3] and lines[3].startswith("acme")

    status, out, _ = run(capsys, dsn, "list", "--tenant", "acme")
    assert status == 0 and len(out.splitlines()) == 3

    status, out, _ = run(capsys, dsn, "show", "nightly", "--tenant", "acme")
    assert status == 0
    assert "rule:      cron 30 2 * * * Europe/Berlin" in out and "catch_up:  all" in out

    assert run(capsys, dsn, "pause", "nightly", "--tenant", "acme")[:2] == (
        0,
        "paused schedule nightly of tenant acme\n",
    )
    assert "state:     paused" in run(capsys, dsn, "show", "nightly", "--tenant", "acme")[1]
    assert run(capsys, dsn, "resume", "nightly", "--tenant", "acme")[0] == 0
    assert run(capsys, dsn, "remove", "nightly", "--tenant", "acme")[0] == 0
    status, out, err = run(capsys, dsn, "show", "nightly", "--tenant", "acme")
    assert (status, out) == (2, "")
    assert err == "fairqueue: tenant 'acme' has no schedule named 'nightly'\n"


def test_a_name_another_tenant_has_exits_2_and_changes_nothing(capsys, dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "nightly", "tick", cron="0 3 * * *", tenant_id="acme")
    for verb in ("pause", "resume", "remove", "show"):
        status, out, err = run(capsys, dsn, verb, "nightly", "--tenant", "other")
        assert (status, out) == (2, "")
        assert err == "fairqueue: tenant 'other' has no schedule named 'nightly'\n"
    row = conn.execute("select tenant_id, paused from fairqueue.schedules").fetchone()
    assert row == {"tenant_id": "acme", "paused": False}


def test_jobs_show_names_the_schedule_of_a_ticks_job(capsys, dsn, conn) -> None:
    with connect(dsn, autocommit=True) as app:
        add_schedule(app, "refresh", "tick", every=timedelta(minutes=1), tenant_id="acme")
    conn.execute("update fairqueue.schedules set next_tick_at = date_trunc('minute', now())")
    with connect(dsn, autocommit=True) as app:
        sweep_schedules(app, None)
        job_id = get_schedule(app, "refresh", tenant_id="acme").last_job_id
    assert main(["--database-url", dsn, "jobs", "show", str(job_id)]) == 0
    out = capsys.readouterr().out
    assert "schedule:    refresh\n" in out
