"""The dashboard's pages at scale: with 100,000 groups (each with a due job, spread over 1,000
tenants on three plans, their served counts varied) and a million finished jobs, each page is
fetched over HTTP from a dashboard server in this process, logged in, as the application role;
the time from request to the last byte of the page is reported per page, the median of the
repeats after one untimed fetch. The issue's bound is 200 ms a page.

The rows are written as the superuser in a few statements (the pending jobs through the jobs
table, so its triggers make the served standings; the finished jobs straight into their days),
then analyzed. Charts are drawn by the browser afterwards and are not in the figure. A job's
page is timed on the newest failed job (its attempts, error and run) and on the newest waiting
job, whose page also places it among the type's 100,000 standings (fairqueue.group_standing).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any, Final

from fairqueue.dashboard import DashboardServer
from fairqueue.db import Connection, connect
from fairqueue.stage import Stage

from . import database
from .formats import table
from .sizes import FULL, SMOKE, Sizes

MAX_PAGE_S: Final = 0.2
SECRET: Final = "bench-dashboard-" + "b" * 32
PAGES: Final = ("/", "/fairness", "/jobs", "/failed", "/groups", "/quotas", "/runs", "/schedules")
# The path a job's page is reported under.
JOB_PAGE: Final = "/jobs/{id}"
# A waiting job's page also places the job in its type's order (fairqueue.group_standing).
WAITING_PAGE: Final = "/jobs/{id} (waiting)"
# The stage of the loaded jobs: what lets a job's page place it in its type's order.
STAGES: Final = [Stage("bench_page", handler=lambda job: None)]


@dataclass(frozen=True)
class Scale:
    """How much the database holds while the pages are timed, and the fetches per page."""

    groups: int
    tenants: int
    finished: int
    repeats: int


SCALES: Final = {
    "full": Scale(groups=100_000, tenants=1_000, finished=1_000_000, repeats=7),
    "smoke": Scale(groups=200, tenants=20, finished=2_000, repeats=2),
}


@dataclass(frozen=True)
class PageRender:
    """One page's median time to fetch, its slowest and its size."""

    path: str
    groups: int
    finished: int
    median_s: float
    max_s: float
    bytes: int


_PENDING = """
insert into fairqueue.jobs (type, payload, tenant_id, group_id, created_at, run_after)
select 'bench_page', '{}', 't' || (g %% %(tenants)s), 'g' || g,
       now() - (g %% 3600) * interval '1 second', now() - interval '1 second'
  from generate_series(1, %(groups)s) g
"""
_FINISHED = """
insert into fairqueue.finished_jobs
       (id, type, payload, tenant_id, group_id, status, attempts, max_attempts, run_after,
        created_at, finished_at, last_error, credit_cost, release_tries)
select gen_random_uuid(), 'bench_page', '{}', 't' || (i %% %(tenants)s), 'g' || (i %% %(groups)s),
       case when i %% 100 = 0 then 'failed' else 'done' end, 1, 3, stamp, stamp, stamp,
       case when i %% 100 = 0 then 'bench failure' end, 0, 0
  from generate_series(1, %(finished)s) i,
       lateral (select now() - (i %% 72000) * interval '1 second' as stamp) s
"""
_SERVED = """
update fairqueue.served
   set n = (hashtext(group_key) & 1023),
       plan = (array['free', 'pro', 'team'])[1 + (hashtext(tenant_key) & 1)
                                             + (tenant_key > 't5')::int]
"""
_RUNS = """
insert into fairqueue.runs (trigger, stop_reason, jobs_done, jobs_failed, started_at, finished_at)
select 'cron', (array['no_work', 'time_budget', 'quota_reserve'])[1 + i %% 3], 500, 5,
       now() - i * interval '5 minutes', now() - i * interval '5 minutes' + interval '1 minute'
  from generate_series(1, 288) i
"""
_CREDITS = """
insert into fairqueue.credits (tenant_id, kind, amount, note)
select 't' || (i %% %(tenants)s), 'grant', 100, 'bench' from generate_series(1, %(tenants)s * 10) i
"""


def load(conn: Connection, scale: Scale) -> None:
    """Empty the tables, then fill them to the scale."""
    database.reset(conn)
    conn.execute("truncate fairqueue.credits")
    params = {"groups": scale.groups, "tenants": scale.tenants, "finished": scale.finished}
    conn.execute(_PENDING, params)
    conn.execute(_SERVED, {})
    conn.execute(_FINISHED, params)
    conn.execute(_RUNS, {})
    conn.execute(_CREDITS, params)
    database.vacuum_analyze(
        conn,
        "fairqueue.jobs",
        "fairqueue.served",
        "fairqueue.finished_jobs",
        "fairqueue.runs",
        "fairqueue.credits",
    )


@contextmanager
def _served(dsn: str) -> Iterator[str]:
    """A dashboard server over ``dsn`` on a free port, answering in a thread; its URL."""
    stop = threading.Event()
    board = DashboardServer(("127.0.0.1", 0), dsn, secret=SECRET, stages=STAGES)
    thread = threading.Thread(target=board.serve_until, args=(stop,), daemon=True)
    thread.start()
    try:
        yield board.url
    finally:
        stop.set()
        thread.join(timeout=30)
        board.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _session(url: str) -> str:
    opener = urllib.request.build_opener(_NoRedirect)
    form = urllib.parse.urlencode({"secret": SECRET}).encode()
    try:
        opener.open(url + "/login", data=form, timeout=30)
    except urllib.error.HTTPError as answer:
        if answer.code != 303:
            raise
        return str(answer.headers["Set-Cookie"]).split(";")[0]
    raise RuntimeError("the dashboard did not answer the login with a redirect")


def _fetch(url: str, cookie: str) -> tuple[float, int]:
    request = urllib.request.Request(url, headers={"Cookie": cookie})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as answer:
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{url} answered {answer.status}")
    return time.perf_counter() - started, len(body)


def measure(
    conn: Connection, dsn: str, sizes: Sizes, progress: Callable[[str], None]
) -> list[PageRender]:
    scale = SCALES.get(sizes.mode, SCALES["smoke"])
    load(conn, scale)
    progress(f"dashboard: {scale.groups:,} groups, {scale.finished:,} finished jobs loaded")
    found = []
    failed = conn.execute(
        "select id from fairqueue.finished_jobs where status = 'failed'"
        " order by created_at desc, id desc limit 1"
    ).fetchone()
    waiting = conn.execute(
        "select id from fairqueue.jobs where status = 'pending'"
        " order by created_at desc, id desc limit 1"
    ).fetchone()
    assert failed is not None and waiting is not None
    pages = {path: path for path in PAGES} | {
        JOB_PAGE: f"/jobs/{failed['id']}",
        WAITING_PAGE: f"/jobs/{waiting['id']}",
    }
    # The server's pool works as the application role, whatever login the DSN names.
    with _served(dsn) as url:
        cookie = _session(url)
        for path, fetched in pages.items():
            _fetch(url + fetched, cookie)  # untimed: the first fetch warms the caches
            times, size = [], 0
            for _ in range(scale.repeats):
                seconds, size = _fetch(url + fetched, cookie)
                times.append(seconds)
            render = PageRender(
                path, scale.groups, scale.finished, statistics.median(times), max(times), size
            )
            found.append(render)
            progress(f"dashboard: {path} in {render.median_s * 1000:.0f} ms (median)")
    database.reset(conn)
    conn.execute("truncate fairqueue.credits")
    return found


def slowest(renders: list[PageRender]) -> PageRender | None:
    """The page with the longest median."""
    return max(renders, key=lambda r: r.median_s, default=None)


def as_json(renders: list[PageRender]) -> list[dict[str, Any]]:
    return [asdict(r) for r in renders]


def section(renders: list[PageRender]) -> list[str]:
    if not renders:
        return []
    first = renders[0]
    rows = [
        [
            f"`{r.path}`",
            f"{r.median_s * 1000:,.0f}",
            f"{r.max_s * 1000:,.0f}",
            f"{r.bytes / 1024:,.0f}",
            "yes" if r.median_s < MAX_PAGE_S else "**no**",
        ]
        for r in renders
    ]
    return [
        f"### Dashboard pages: {first.groups:,} groups, {first.finished:,} finished jobs",
        "",
        "Each page fetched over HTTP from a dashboard server in the bench process, logged in,"
        " as the application role (bench/dashboard.py); the median of the repeats after one"
        " untimed fetch.",
        "",
        *table(
            ["page", "median ms", "slowest ms", "KiB", f"under {MAX_PAGE_S * 1000:.0f} ms"],
            "lrrrl",
            rows,
        ),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.dashboard --dsn DSN``: this workload alone, at the full run's sizes,
    in a scratch database (superuser); prints its section of the report."""
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    parser.add_argument("--dsn", required=True, help="a scratch database (superuser)")
    parser.add_argument("--smoke", action="store_true", help="the smoke run's sizes")
    args = parser.parse_args(argv)
    database.prepare(args.dsn)
    sizes = SMOKE if args.smoke else FULL
    with connect(args.dsn, autocommit=True) as admin:
        renders = measure(admin, args.dsn, sizes, lambda line: print(line, file=sys.stderr))
    print("\n".join(section(renders)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
