"""The dashboard in Debian's Chromium against a real server process and the example's workload:
each page shows what the database holds, with no console error and no serious accessibility
violation; the actions change the rows; the login, the form tokens and the escaping hold."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe

from fairqueue.db import Connection
from support.dashboard import HOSTILE, SECRET

pytestmark = pytest.mark.timeout(60)

PAGES = ["/", "/fairness", "/jobs", "/failed", "/groups", "/quotas", "/runs", "/schedules"]
SHOTS = Path(os.environ.get("FAIRQUEUE_DASHBOARD_SHOTS") or tempfile.gettempdir()) / "dashboard"


class Visit:
    """A logged-in browser page that records console errors and uncaught exceptions."""

    def __init__(self, page: Any, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def go(self, path: str) -> Any:
        answer = self.page.goto(self.url + path)
        assert answer is not None
        return answer

    def texts(self, selector: str) -> list[str]:
        return [t.strip() for t in self.page.locator(selector).all_inner_texts()]


@pytest.fixture
def visit(browser: Any, board_url: str) -> Iterator[Visit]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen = Visit(page, board_url)
    seen.go("/login")
    page.fill("#secret", SECRET)
    page.click("button[type=submit]")
    page.wait_for_url(board_url + "/")
    yield seen
    context.close()


def one(conn: Connection, text: str, *params: Any) -> Any:
    row = conn.execute(text, params).fetchone()  # type: ignore[call-overload]
    assert row is not None
    return next(iter(row.values()))


def test_every_page_renders_clean_and_accessible(visit: Visit) -> None:
    axe = Axe()
    SHOTS.mkdir(parents=True, exist_ok=True)
    for path in PAGES:
        answer = visit.go(path)
        assert answer.status == 200, path
        visit.page.wait_for_load_state("networkidle")
        name = path.strip("/") or "overview"
        visit.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        violations = axe.run(visit.page).response["violations"]
        grave = [v["id"] for v in violations if v["impact"] in ("serious", "critical")]
        assert grave == [], (path, grave)
    assert visit.errors == []


def test_overview_and_fairness_show_the_figures_the_database_holds(
    visit: Visit, board_conn: Connection
) -> None:
    visit.go("/")
    by_type = board_conn.execute(
        "select type, count(*) filter (where status = 'pending' and run_after <= now()) as due,"
        " count(*) filter (where status = 'pending' and run_after > now()) as later,"
        " count(*) filter (where status = 'failed' and finished_at > now() - interval '1 day')"
        " as failed"
        " from fairqueue.all_jobs group by type"
        " having count(*) filter (where status in ('queued', 'pending', 'running', 'failed')) > 0"
        " order by type"
    ).fetchall()
    shown = {}
    for row in visit.page.locator("#types tbody tr").all():
        cells = [c.strip() for c in row.locator("th, td").all_inner_texts()]
        shown[cells[0]] = (int(cells[1]), int(cells[2]), int(cells[6]))
    assert shown == {r["type"]: (r["due"], r["later"], r["failed"]) for r in by_type}
    assert any(failed for _, _, failed in shown.values())
    assert visit.page.locator("canvas[data-chart]").count() == 2

    visit.go("/fairness")
    served = one(board_conn, "select coalesce(sum(n), 0) from fairqueue.served")
    assert served > 0
    assert int(visit.page.inner_text("#served")) == served
    tenants = one(
        board_conn,
        "select count(distinct tenant_key) from fairqueue.served"
        " where n > 0 or head_id is not null",
    )
    assert int(visit.page.inner_text("#tenant-count")) == tenants
    per_tenant = board_conn.execute(
        "select coalesce(tenant_id, '(no tenant)') as tenant, sum(n) as served"
        " from fairqueue.served where n > 0 or head_id is not null group by tenant_id"
    ).fetchall()
    rows = {}
    for row in visit.page.locator("#tenants tbody tr").all():
        cells = [c.strip() for c in row.locator("th, td").all_inner_texts()]
        rows[cells[0]] = int(cells[3])
    assert rows == {r["tenant"]: r["served"] for r in per_tenant}
    # Jain's index between tenants and between groups (each in one type's order), computed
    # here from the rows.
    for figure, key in (("#tenant-index", "tenant_key"), ("#group-index", "type, group_key")):
        counts = [
            float(r["n"])
            for r in board_conn.execute(
                "select sum(n) as n from fairqueue.served where n > 0 or head_id is not null"
                " group by " + key
            ).fetchall()
        ]
        jain = sum(counts) ** 2 / (len(counts) * sum(c * c for c in counts))
        assert visit.page.inner_text(figure) == f"{jain:.3f}", figure
    assert visit.page.locator("canvas[data-chart]").count() == 3
    assert visit.errors == []


def test_lists_show_the_rows_the_database_holds(visit: Visit, board_conn: Connection) -> None:
    visit.go("/jobs")
    total = one(board_conn, "select count(*) from fairqueue.all_jobs")
    listed = visit.texts("table tbody tr td:first-child a")
    assert len(listed) == min(total, 50)
    for job_id in listed[:10]:
        status = one(board_conn, "select status from fairqueue.all_jobs where id = %s", job_id)
        row = visit.page.locator("tr", has=visit.page.locator(f'a:text-is("{job_id}")'))
        assert row.locator("td").nth(2).inner_text().strip() == status

    # Filtering by tenant posts the tenant: it is in no URL.
    visit.page.fill("#f-tenant", "acme")
    visit.page.select_option("#f-status", "failed")
    visit.page.click("form.filters button")
    visit.page.wait_for_load_state()
    assert "acme" not in visit.page.url
    failed_acme = {
        str(r["id"])
        for r in board_conn.execute(
            "select id from fairqueue.all_jobs where tenant_id = 'acme' and status = 'failed'"
        ).fetchall()
    }
    assert failed_acme
    assert set(visit.texts("table tbody tr td:first-child a")) == failed_acme

    visit.go("/failed")
    failed = {
        str(r["id"])
        for r in board_conn.execute(
            "select id from fairqueue.all_jobs where status = 'failed'"
        ).fetchall()
    }
    assert set(visit.texts("table tbody tr td:first-child a")) == failed

    visit.go("/quotas")
    quota = board_conn.execute("select name, remaining, capacity from fairqueue.quotas").fetchone()
    assert quota is not None
    cells = visit.texts("#quotas tbody tr:first-child th, #quotas tbody tr:first-child td")
    assert cells[:3] == [quota["name"], str(quota["remaining"]), str(quota["capacity"])]
    balances = {
        r["tenant_id"]: str(r["balance"])
        for r in board_conn.execute(
            "select tenant_id, sum(amount) as balance from fairqueue.credits group by tenant_id"
        ).fetchall()
    }
    shown = {}
    for row in visit.page.locator("#balances tbody tr").all():
        cells = [c.strip() for c in row.locator("th, td").all_inner_texts()]
        shown[cells[0]] = cells[1]
    assert shown == balances

    visit.go("/runs")
    runs = one(board_conn, "select count(*) from fairqueue.runs")
    assert visit.page.locator("#runs tbody tr").count() == min(runs, 50)

    visit.go("/groups")
    groups = one(board_conn, "select count(distinct group_key) from fairqueue.served")
    assert visit.page.locator("#groups tbody tr").count() == min(groups, 50)
    assert visit.errors == []


def test_a_jobs_page_explains_why_it_waits(visit: Visit, board_conn: Connection) -> None:
    row = board_conn.execute(
        "select id from fairqueue.jobs where status = 'pending' and type = 'search'"
        " order by created_at limit 1"
    ).fetchone()
    if row is None:
        row = board_conn.execute(
            "select id from fairqueue.jobs where status = 'pending' order by created_at limit 1"
        ).fetchone()
    assert row is not None
    visit.go(f"/jobs/{row['id']}")
    assert visit.page.inner_text("#status") == "pending"
    reasons = visit.texts("#waiting li")
    assert reasons, visit.page.inner_text("#waiting")
    SHOTS.mkdir(parents=True, exist_ok=True)
    visit.page.screenshot(path=str(SHOTS / "job.png"), full_page=True)
    assert visit.errors == []


def test_pause_and_resume_change_the_groups_row(visit: Visit, board_conn: Connection) -> None:
    key = one(
        board_conn,
        "select group_key from fairqueue.served where tenant_id = 'acme'"
        " and group_key like 'acme/acme/%%' order by group_key limit 1",
    )
    status_sql = "select status from fairqueue.groups where key = %s"
    before = board_conn.execute(status_sql, (key,)).fetchone()
    assert before is None or before["status"] == "active"
    visit.go("/groups")
    visit.page.click(f'form:has(input[name=group_key][value="{key}"]) button')
    visit.page.wait_for_url("**/groups?done=paused")
    assert one(board_conn, status_sql, key) == "paused"
    visit.page.click(f'form:has(input[name=group_key][value="{key}"]) button')
    visit.page.wait_for_url("**/groups?done=resumed")
    assert one(board_conn, status_sql, key) == "active"
    assert visit.errors == []


def test_retry_and_cancel_change_the_jobs(visit: Visit, board_conn: Connection) -> None:
    failed = one(
        board_conn,
        "select id from fairqueue.all_jobs where status = 'failed' and type = 'doomed'"
        " and tenant_id = 'acme'",
    )
    visit.go("/failed")
    visit.page.click(f'form[action$="/jobs/{failed}/retry"] button')
    visit.page.wait_for_url(f"**/jobs/{failed}?done=retried")
    assert one(board_conn, "select status from fairqueue.jobs where id = %s", failed) == "pending"
    note = one(board_conn, "select last_error from fairqueue.jobs where id = %s", failed)
    assert note.startswith("retried by hand")

    open_job = one(board_conn, "select id from fairqueue.jobs where payload->>'doc' = 'to-cancel'")
    visit.go(f"/jobs/{open_job}")
    visit.page.click(f'form[action$="/jobs/{open_job}/cancel"] button')
    visit.page.wait_for_url(f"**/jobs/{open_job}?done=cancelled")
    assert (
        one(board_conn, "select status from fairqueue.all_jobs where id = %s", open_job)
        == "cancelled"
    )
    assert visit.errors == []


def test_a_forged_post_without_the_form_token_changes_nothing(
    visit: Visit, board_conn: Connection
) -> None:
    key = one(
        board_conn,
        "select group_key from fairqueue.served where tenant_id = 'globex' order by group_key"
        " limit 1",
    )
    status_sql = "select count(*) from fairqueue.groups where status = 'paused'"
    paused = one(board_conn, status_sql)
    request = visit.page.request  # carries the session cookie
    for form in ({"group_key": key}, {"group_key": key, "form_token": "0" * 64}):
        answer = request.post(visit.url + "/groups/pause", form=form, max_redirects=0)
        assert answer.status == 403
    open_job = one(board_conn, "select id from fairqueue.jobs where status = 'pending' limit 1")
    answer = request.post(visit.url + f"/jobs/{open_job}/cancel", form={}, max_redirects=0)
    assert answer.status == 403
    assert one(board_conn, status_sql) == paused
    assert one(board_conn, "select status from fairqueue.jobs where id = %s", open_job) == (
        "pending"
    )


def test_hostile_labels_render_as_text(visit: Visit) -> None:
    for path in ("/groups", "/failed", "/fairness"):
        visit.go(path)
        visit.page.wait_for_load_state("networkidle")
        assert HOSTILE in visit.page.inner_text("main"), path
        assert visit.page.locator("main script:not([type='application/json'])").count() == 0
    assert visit.dialogs == []
    assert visit.errors == []


def test_without_the_secret_only_the_login_page(
    browser: Any, board_url: str, board_conn: Connection
) -> None:
    context = browser.new_context()
    page = context.new_page()
    for path in PAGES:
        page.goto(board_url + path)
        assert page.url == board_url + "/login", path
        assert page.locator("nav").count() == 0
        assert page.locator("table").count() == 0
    page.fill("#secret", "not-the-secret")
    page.click("button[type=submit]")
    assert page.locator("[role=alert]").inner_text() == "That is not the operator secret."
    assert context.cookies() == []
    # An action posted without a session changes nothing.
    open_job = one(board_conn, "select id from fairqueue.jobs where status = 'pending' limit 1")
    answer = page.request.post(board_url + f"/jobs/{open_job}/cancel", max_redirects=0)
    assert answer.status == 401
    assert one(board_conn, "select status from fairqueue.jobs where id = %s", open_job) == (
        "pending"
    )
    # The right secret: an HttpOnly, SameSite=Strict session cookie.
    page.goto(board_url + "/login")
    page.fill("#secret", SECRET)
    page.click("button[type=submit]")
    page.wait_for_url(board_url + "/")
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    context.close()
