"""``fairqueue jobs list`` and ``fairqueue jobs show``, with why a job has not run, against the
test's database."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID, uuid4

import pytest

from fairqueue import enqueue, run_pipeline
from fairqueue.cli import main
from fairqueue.db import Connection, connect
from fairqueue.groups import pause_group
from fairqueue.lanes import admit
from fairqueue.plans import set_plan
from fairqueue.quotas import define_quota
from fairqueue.results import save_result
from support import jobs_stages

STAGES = "support.jobs_stages:JOBS_STAGES"


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FAIRQUEUE_STAGES", "FAIRQUEUE_ENV"):
        monkeypatch.delenv(name, raising=False)


def listed(dsn: str, capsys: pytest.CaptureFixture[str], *options: str) -> list[list[str]]:
    assert main(["--database-url", dsn, "jobs", "list", *options]) == 0, capsys.readouterr().err
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["id", "type", "status"]
    return [line.split() for line in lines[2:]]


def shown(dsn: str, capsys: pytest.CaptureFixture[str], job_id: UUID) -> str:
    code = main(["--database-url", dsn, "jobs", "show", str(job_id), "--stages", STAGES])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_list_is_newest_first_across_tenants_and_filters_by_each_field(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    made = [
        enqueue(conn, "looked_at", {"n": 1}, tenant_id="acme", group_id="inbox"),
        enqueue(conn, "looked_at", {"n": 2}, tenant_id="zed", group_id="inbox"),
        enqueue(conn, "doomed", {"n": 3}, tenant_id="acme", group_id="outbox"),
        enqueue(conn, "looked_at", {"n": 4}),
    ]
    run_pipeline(dsn, [jobs_stages.DOOMED])  # the doomed job fails for good

    rows = listed(dsn, capsys)
    assert [UUID(r[0]) for r in rows] == list(reversed(made))
    assert [r[2] for r in rows] == ["pending", "failed", "pending", "pending"]

    assert [UUID(r[0]) for r in listed(dsn, capsys, "--tenant", "acme")] == [made[2], made[0]]
    assert [UUID(r[0]) for r in listed(dsn, capsys, "--status", "failed")] == [made[2]]
    assert [UUID(r[0]) for r in listed(dsn, capsys, "--type", "doomed")] == [made[2]]
    by_group = listed(dsn, capsys, "--group", "inbox", "--tenant", "zed")
    assert [UUID(r[0]) for r in by_group] == [made[1]]
    assert [UUID(r[0]) for r in listed(dsn, capsys, "--limit", "2")] == [made[3], made[2]]
    # The failed job's last error line is in its row.
    (failed,) = listed(dsn, capsys, "--status", "failed")
    assert "said" in failed and "no" in failed


def test_list_reads_finished_jobs_that_left_the_hot_table(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme")
    run_pipeline(dsn, [jobs_stages.LOOKED_AT])
    save_result(conn, job_id, {"ok": True}, tenant_id="acme")
    conn.execute("select fairqueue.move_finished(100, interval '1 s')")
    assert conn.execute("select count(*) as n from fairqueue.finished_jobs").fetchone() == {"n": 1}
    assert [UUID(r[0]) for r in listed(dsn, capsys, "--status", "done")] == [job_id]
    out = shown(dsn, capsys, job_id)
    assert "status:      done" in out
    assert "result:      saved by client" in out and '{"ok": true}' in out
    assert '"echo"' in out  # its output
    assert "why waiting" not in out


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--tenant", ""], "tenant_id"), (["--type", "x" * 201], "type")],
)
def test_list_refuses_a_bad_filter_in_one_line(
    dsn: str, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    assert main(["--database-url", dsn, "jobs", "list", *options]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("fairqueue: ") and message in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_show_an_unknown_job_exits_2_naming_it(
    dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = uuid4()
    assert main(["--database-url", dsn, "jobs", "show", str(missing)]) == 2
    assert f"no job {missing}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["--database-url", dsn, "jobs", "show", "not-a-uuid"])
    assert exited.value.code == 2
    assert "not a job id" in capsys.readouterr().err


def test_show_prints_the_job_and_that_it_is_next(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "looked_at", {"doc": "a"}, tenant_id="acme", group_id="inbox")
    out = shown(dsn, capsys, job_id)
    assert f"job:         {job_id}" in out
    assert "tenant:      acme" in out and "group:       inbox" in out
    assert '{"doc": "a"}' in out
    assert "it is next: the next claim of type 'looked_at' takes it" in out


def test_a_job_not_yet_due_says_until_when(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme", run_after=timedelta(hours=2))
    row = conn.execute("select run_after from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row is not None
    out = shown(dsn, capsys, job_id)
    assert f"it is not due until {row['run_after']:%Y-%m-%d %H:%M:%S}" in out
    assert "stand ahead" not in out and "is next" not in out


def test_a_job_of_a_paused_group_says_so(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="inbox")
    pause_group(conn, "inbox", tenant_id="acme")
    assert "its group 'inbox' is paused" in shown(dsn, capsys, job_id)


def test_a_job_behind_others_in_its_lane_names_the_holder(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    with connect(dsn) as c:
        first = admit(c, "ada", "serial_look", {}, tenant_id="acme")
        second = admit(c, "ada", "serial_look", {}, tenant_id="acme")
        third = admit(c, "ada", "serial_look", {}, tenant_id="acme")
        c.commit()
    out = shown(dsn, capsys, third.job_id)
    assert f"it waits in lane 'ada' behind 2 job(s); job {first.job_id} holds it" in out
    assert second.job_id != first.job_id


def test_a_job_whose_quota_is_at_its_reserve_says_until_when(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    define_quota(conn, jobs_stages.QUOTA, capacity=10, period=timedelta(hours=1), reserve=10)
    job_id = enqueue(conn, "rationed", {}, tenant_id="acme")
    out = shown(dsn, capsys, job_id)
    assert f"its stage's quota '{jobs_stages.QUOTA}' is at its reserve (10 of 10 left" in out

    conn.execute("update fairqueue.quotas set remaining = 0, reserve = 0")
    assert f"quota '{jobs_stages.QUOTA}' is spent (0 of 10 left" in shown(dsn, capsys, job_id)


def test_a_job_of_an_undefined_quota_says_to_define_it(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "rationed", {}, tenant_id="acme")
    assert f"spends quota '{jobs_stages.QUOTA}', which is not defined" in shown(dsn, capsys, job_id)


def test_groups_ahead_in_the_fair_order_are_counted_with_their_standings(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    set_plan(conn, "paying", "team")
    set_plan(conn, "trial", "free")
    # Two of the trial group's jobs ran today: its served count is 2.
    for _ in range(2):
        enqueue(conn, "looked_at", {}, tenant_id="trial", group_id="busy")
    run_pipeline(dsn, [jobs_stages.LOOKED_AT])
    busy = enqueue(conn, "looked_at", {}, tenant_id="trial", group_id="busy")
    quiet = enqueue(conn, "looked_at", {}, tenant_id="trial", group_id="quiet")
    enqueue(conn, "looked_at", {}, tenant_id="paying", group_id="any")
    behind = enqueue(conn, "looked_at", {}, tenant_id="trial", group_id="busy")

    out = shown(dsn, capsys, busy)
    # team first; then the free groups, fewest served first.
    assert "2 group(s) stand ahead of its group in the fair order" in out
    table = [line.split() for line in out.splitlines() if line.startswith("  its group")]
    table += [line.split() for line in out.splitlines() if line.startswith("  ahead")]
    assert [(r[-6], r[-5], r[-4]) for r in table] == [
        ("3", "free", "2"),
        ("2", "free", "0"),
        ("1", "team", "0"),
    ]
    assert "1 group(s) stand ahead of its group" in shown(dsn, capsys, quiet)
    assert "1 older due job(s) of its group go first" in shown(dsn, capsys, behind)


def test_a_tenant_fair_type_places_its_tenant_among_tenants_then_its_group(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    set_plan(conn, "paying", "team")
    set_plan(conn, "trial", "free")
    set_plan(conn, "spread", "free")
    # Two of the trial tenant's jobs ran today (its served count is 2); the spread tenant has
    # none served but three groups: a tenant's count is the sum of its groups'.
    for _ in range(2):
        enqueue(conn, "tenant_fair_look", {}, tenant_id="trial", group_id="busy")
    run_pipeline(dsn, [jobs_stages.TENANT_FAIR])
    first = enqueue(conn, "tenant_fair_look", {}, tenant_id="trial", group_id="busy")
    later = enqueue(conn, "tenant_fair_look", {}, tenant_id="trial", group_id="other")
    enqueue(conn, "tenant_fair_look", {}, tenant_id="paying", group_id="any")
    for group in ("a", "b", "c"):
        enqueue(conn, "tenant_fair_look", {}, tenant_id="spread", group_id=group)

    out = shown(dsn, capsys, first)
    # team first; then the free tenants, fewest served first.
    assert "2 tenant(s) stand ahead of its tenant in the fair order" in out
    table = [line.split() for line in out.splitlines() if line.startswith("  its tenant")]
    table += [line.split() for line in out.splitlines() if line.startswith("  ahead")]
    assert [(r[-6], r[-5], r[-4]) for r in table] == [
        ("3", "free", "2"),
        ("2", "free", "0"),
        ("1", "team", "0"),
    ]
    # Its other group has served nothing, so within the tenant it comes first: the busy group's
    # job is behind it, the other group's job is not.
    assert "1 of its tenant's group(s) stand ahead of its group" in out
    assert "of its tenant's group(s)" not in shown(dsn, capsys, later)
    paying = enqueue(conn, "tenant_fair_look", {}, tenant_id="paying", group_id="second")
    assert "it is next" not in shown(dsn, capsys, paying)


def test_a_tenant_fair_type_with_a_quantum_places_tenants_by_whole_quanta(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two of the trial tenant's jobs ran today: at quantum 4 it is still in its first quantum,
    # level with a tenant served none, and its older job in a fresh group stands first.
    for _ in range(2):
        enqueue(conn, "tenant_quanta_look", {}, tenant_id="trial", group_id="busy")
    run_pipeline(dsn, [jobs_stages.TENANT_QUANTA])
    trial = enqueue(conn, "tenant_quanta_look", {}, tenant_id="trial", group_id="other")
    fresh = enqueue(conn, "tenant_quanta_look", {}, tenant_id="fresh", group_id="g")
    assert "it is next" in shown(dsn, capsys, trial)
    assert "1 tenant(s) stand ahead of its tenant" in shown(dsn, capsys, fresh)


def test_show_without_the_stage_list_says_what_it_cannot_tell(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme")
    code = main(
        ["--database-url", dsn, "jobs", "show", str(job_id), "--stages", "no_such_module:X"]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "quotas are not checked" in captured.err
    assert "cannot tell which stage applies without the stage list" in captured.out


def test_show_with_no_stage_list_given_does_not_judge_by_the_example(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    # A job of the caller's own stage: the example's stages do not claim it, which says nothing.
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme")
    assert main(["--database-url", dsn, "jobs", "show", str(job_id)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "nothing claims it" not in captured.out
    assert captured.out.splitlines()[-1] == (
        "why waiting: cannot tell which stage applies without the stage list"
        " (--stages module:attribute or FAIRQUEUE_STAGES)"
    )


def test_show_takes_the_stage_list_from_fairqueue_stages(
    dsn: str, conn: Connection, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme")
    monkeypatch.setenv("FAIRQUEUE_STAGES", STAGES)
    assert main(["--database-url", dsn, "jobs", "show", str(job_id)]) == 0
    out = capsys.readouterr().out
    assert "why waiting:\n" in out
    assert "cannot tell" not in out and "nothing claims it" not in out
