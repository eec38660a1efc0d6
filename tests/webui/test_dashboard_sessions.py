"""The dashboard's login, form tokens and refusals, through its WSGI application against the
test's database (no browser): what holds wherever Chromium is missing."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import uuid4

import pytest

from fairqueue import enqueue
from fairqueue.dashboard import Dashboard, dashboard_secret
from fairqueue.dashboard.sessions import COOKIE_NAME, Sessions
from fairqueue.db import Connection, connect
from fairqueue.errors import ConfigurationError
from fairqueue.roles.serve import roles_of
from support.dashboard import HOSTILE, SECRET

pytestmark = pytest.mark.timeout(60)


def call(
    app: Dashboard, method: str, path: str, *, form: str = "", cookie: str = ""
) -> tuple[int, dict[str, str], str]:
    body = form.encode()
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "HTTP_COOKIE": cookie,
    }
    answered: list[Any] = []
    chunks = app(environ, lambda status, headers, exc_info=None: answered.extend([status, headers]))
    return int(answered[0][:3]), dict(answered[1]), b"".join(chunks).decode()


@pytest.fixture
def app(dsn: str) -> Dashboard:
    @contextmanager
    def connections() -> Iterator[Connection]:
        with connect(dsn, autocommit=True) as conn:
            yield conn

    return Dashboard(connections, SECRET)


def logged_in(app: Dashboard) -> tuple[str, str]:
    status, headers, _ = call(app, "POST", "/login", form=f"secret={SECRET}")
    assert status == 303
    cookie = headers["Set-Cookie"].split(";")[0]
    _, _, page = call(app, "GET", "/groups", cookie=cookie)
    token = page.split('name="form_token" value="')[1].split('"')[0]
    return cookie, token


def test_the_session_cookie_is_http_only_strict_and_signed(app: Dashboard) -> None:
    status, headers, _ = call(app, "POST", "/login", form=f"secret={SECRET}")
    assert status == 303
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    value = cookie.split(";")[0]
    assert call(app, "GET", "/", cookie=value)[0] == 200
    # The same cookie with its expiry pushed later no longer matches its signature.
    expires, rest = value.removeprefix(f"{COOKIE_NAME}=").split(".", 1)
    forged = f"{COOKIE_NAME}={int(expires) + 3600}.{rest}"
    assert call(app, "GET", "/", cookie=forged)[:2][0] == 303
    assert call(app, "GET", "/", cookie=f"{COOKIE_NAME}=garbage")[0] == 303


def test_an_expired_session_is_refused() -> None:
    sessions = Sessions(SECRET, ttl_s=-1)
    assert sessions.session_of(sessions.start()) is None
    fresh = Sessions(SECRET)
    session = fresh.session_of(fresh.start())
    assert session is not None
    assert session.expires_at > time.time()
    # Another secret's cookie is no session here.
    assert Sessions("another-" + SECRET).session_of(fresh.start()) is None


def test_a_wrong_secret_gets_the_login_page_again_and_no_cookie(app: Dashboard) -> None:
    status, headers, page = call(app, "POST", "/login", form="secret=guess")
    assert status == 401
    assert "Set-Cookie" not in headers
    assert "That is not the operator secret." in page


def test_an_action_without_its_form_token_changes_nothing(app: Dashboard, conn: Connection) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id="acme", group_id="inbox")
    cookie, token = logged_in(app)
    for form in ("", "form_token=" + "0" * 64):
        status, _, _ = call(app, "POST", f"/jobs/{job_id}/cancel", form=form, cookie=cookie)
        assert status == 403
    assert call(app, "POST", f"/jobs/{job_id}/cancel", form="form_token=x")[0] == 401
    row = conn.execute("select status from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row == {"status": "pending"}
    # With it, the job is cancelled.
    status, headers, _ = call(
        app, "POST", f"/jobs/{job_id}/cancel", form=f"form_token={token}", cookie=cookie
    )
    assert status == 303
    assert headers["Location"] == f"/jobs/{job_id}?done=cancelled"
    row = conn.execute("select status from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row == {"status": "cancelled"}


def test_a_refused_action_says_why_escaped_and_changes_nothing(
    app: Dashboard, conn: Connection
) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id=HOSTILE, group_id="g")
    cookie, token = logged_in(app)
    status, _, page = call(
        app, "POST", f"/jobs/{job_id}/retry", form=f"form_token={token}", cookie=cookie
    )
    assert status == 409
    assert "only a failed job is retried" in page
    status, _, page = call(
        app,
        "POST",
        "/groups/pause",
        form=f"form_token={token}&group_key=nobody%2Fnothing",
        cookie=cookie,
    )
    assert status == 404
    assert "has ever had group" in page
    status, _, page = call(app, "GET", f"/jobs/{uuid4()}", cookie=cookie)
    assert status == 404
    status, _, page = call(
        app, "POST", "/jobs", form=f"form_token={token}&status=lost", cookie=cookie
    )
    assert status == 409
    assert "unknown status" in page
    status, _, page = call(
        app, "POST", "/jobs", form=f"form_token={token}&tenant={HOSTILE}", cookie=cookie
    )
    assert status == 200
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    row = conn.execute("select status from fairqueue.jobs where id = %s", (job_id,)).fetchone()
    assert row == {"status": "pending"}
    assert conn.execute("select count(*) as n from fairqueue.groups").fetchone() == {"n": 0}


def test_the_secret_is_required_and_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAIRQUEUE_DASHBOARD_SECRET", raising=False)
    monkeypatch.delenv("FAIRQUEUE_API_SECRET", raising=False)
    with pytest.raises(ConfigurationError, match="FAIRQUEUE_DASHBOARD_SECRET is not set"):
        roles_of("dashboard")
    assert "dashboard" not in roles_of("all")
    monkeypatch.setenv("FAIRQUEUE_DASHBOARD_SECRET", "short")
    with pytest.raises(ConfigurationError, match="must be at least 32"):
        dashboard_secret()
    monkeypatch.setenv("FAIRQUEUE_DASHBOARD_SECRET", SECRET)
    assert roles_of("dashboard") == ["dashboard"]
    assert roles_of("all")[-1] == "dashboard"
