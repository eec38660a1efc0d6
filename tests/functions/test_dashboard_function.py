"""The dashboard's Lambda (functions/dashboard.py) loaded and invoked as the Lambda runtime
does, with API Gateway HTTP API payload 2.0 events, against the test's database: a login, a
page, and an action with its form token."""

from __future__ import annotations

import base64
import inspect
import logging
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from fairqueue import enqueue
from fairqueue.db import Connection
from fairqueue.dev.lambda_loop import Handler, LocalContext, load_handler
from support.dashboard import HOSTILE, SECRET
from support.databases import ROOT

pytestmark = pytest.mark.timeout(60)

HANDLER_SPEC = f"{ROOT / 'functions' / 'dashboard.py'}:handler"


@pytest.fixture
def dashboard(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Handler]:
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("FAIRQUEUE_DASHBOARD_SECRET", SECRET)
    monkeypatch.setenv("FAIRQUEUE_STAGES", "support.jobs_stages:JOBS_STAGES")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "fairqueue-dashboard")
    monkeypatch.delenv("FAIRQUEUE_ENV", raising=False)
    handler = load_handler(HANDLER_SPEC)
    for log_handler in logging.getLogger("fairqueue-dashboard").handlers:
        if isinstance(log_handler, logging.StreamHandler):
            log_handler.stream = sys.stdout
    yield handler
    inspect.unwrap(handler).__globals__["CONNECTION"].close()


def event(
    method: str, path: str, *, form: dict[str, str] | None = None, cookies: list[str] = ()
) -> dict[str, Any]:
    body = urlencode(form or {})
    return {
        "version": "2.0",
        "routeKey": "ANY /{proxy+}" if path != "/" else "ANY /",
        "rawPath": path,
        "rawQueryString": "",
        "cookies": list(cookies),
        "headers": {"content-type": "application/x-www-form-urlencoded", "host": "example"},
        "requestContext": {"http": {"method": method, "path": path}, "stage": "$default"},
        "body": base64.b64encode(body.encode()).decode(),
        "isBase64Encoded": True,
    }


def test_login_page_and_action_through_the_gateway(dashboard: Handler, conn: Connection) -> None:
    job_id = enqueue(conn, "looked_at", {}, tenant_id=HOSTILE, group_id="g")
    context = LocalContext()
    answer = dashboard(event("GET", "/fairness"), context)
    assert answer["statusCode"] == 303
    assert answer["headers"]["Location"] == "/login"

    answer = dashboard(event("POST", "/login", form={"secret": SECRET}), context)
    assert answer["statusCode"] == 303
    (cookie,) = answer["cookies"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    session = cookie.split(";")[0]

    answer = dashboard(event("GET", f"/jobs/{job_id}", cookies=[session]), context)
    assert answer["statusCode"] == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in answer["body"]
    assert HOSTILE not in answer["body"]
    token = answer["body"].split('name="form_token" value="')[1].split('"')[0]

    forged = dashboard(event("POST", f"/jobs/{job_id}/cancel", cookies=[session]), context)
    assert forged["statusCode"] == 403
    status = conn.execute("select status from fairqueue.jobs where id = %s", (job_id,))
    assert status.fetchone() == {"status": "pending"}
    done = dashboard(
        event("POST", f"/jobs/{job_id}/cancel", form={"form_token": token}, cookies=[session]),
        context,
    )
    assert done["statusCode"] == 303
    status = conn.execute("select status from fairqueue.jobs where id = %s", (job_id,))
    assert status.fetchone() == {"status": "cancelled"}

    script = dashboard(event("GET", "/static/chart.umd.min.js"), context)
    assert script["statusCode"] == 200
    assert "Chart.js" in script["body"][:200]
