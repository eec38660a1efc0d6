"""One process, many roles: the same code paths as the Lambda functions, for running elsewhere.

``fairqueue serve --role cron|worker|sweeper|backstop|api|dashboard|all`` (or
``FAIRQUEUE_ROLE``). Each role is a loop in a thread; a stop request (SIGTERM, Ctrl-C) lets each
finish what it is doing: the cron run finishes its job in flight, gives back what it claimed but
had not started, and closes its run row; the worker finishes the jobs whose handlers run, gives
back the rest of what it claimed and closes its run rows (fairqueue.roles.dispatcher); the
backstop finishes the batch of results it recorded, hooks included; the API answers the requests
in flight. The backstop has a thread of its own so that the sweeper's lease recovery never waits
behind a slow hook.
``all`` includes the API only when ``FAIRQUEUE_API_SECRET`` is set: without it, it could not
verify a token; likewise the dashboard only when ``FAIRQUEUE_DASHBOARD_SECRET`` is set, its
operators' login. How long a stop request waits is ``fairqueue.roles.stopping``'s to bound.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Final

from .. import api, dashboard
from ..doorbells import ringing
from ..doorbells.receiving import source_for
from ..errors import ConfigurationError
from ..pipeline import run_pipeline
from ..settings import settings
from ..stage import Stage
from ..validation import shown_value
from .backstop import Backstop
from .dispatcher import DoorbellWorker
from .sweeper import sweep

log = logging.getLogger("fairqueue.serve")

ROLES: Final = ("cron", "worker", "sweeper", "backstop", "all", "api", "dashboard")
CRON_INTERVAL_S: Final = 300.0
SWEEP_INTERVAL_S: Final = 60.0


def roles_of(role: str) -> list[str]:
    if role not in ROLES:
        raise ConfigurationError(
            f"--role (FAIRQUEUE_ROLE) must be one of {', '.join(ROLES)}; got {shown_value(role)}"
        )
    if role == "api":
        api.api_secret()  # refuses to start without a usable secret
    if role == "dashboard":
        dashboard.dashboard_secret()  # the same for the operators' login
    if role == "all":
        # The API joins only when it has a secret to verify its tokens with.
        with_api = settings().api_secret is not None
        with_dashboard = settings().dashboard_secret is not None
        return [
            "cron",
            "worker",
            "sweeper",
            "backstop",
            *(["api"] if with_api else []),
            *(["dashboard"] if with_dashboard else []),
        ]
    return [role]


def serve(
    role: str,
    dsn: str,
    stages: Sequence[Stage],
    stop: threading.Event,
    *,
    cron_interval_s: float = CRON_INTERVAL_S,
    sweep_interval_s: float = SWEEP_INTERVAL_S,
) -> bool:
    """Run the role's loops until ``stop`` is set; returns once each has wound down, True when
    none of them stopped on an error."""
    ringing.check_configuration()
    roles = roles_of(role)
    loops: dict[str, Callable[[], None]] = {
        "cron": lambda: _every(cron_interval_s, stop, lambda: _cron(dsn, stages, stop)),
        "sweeper": lambda: _every(sweep_interval_s, stop, lambda: _sweep(dsn, stages)),
        "worker": lambda: _work(dsn, stages, stop),
    }
    if "backstop" in roles:
        backstop = Backstop(dsn, stages)  # settings are read (and checked) before any start
        loops["backstop"] = lambda: _every(sweep_interval_s, stop, lambda: _rescue(backstop, stop))
    if "api" in roles:
        # Listening before any thread starts: a taken port or a bad secret stops the start.
        server = api.ApiServer(api.api_address(), dsn, secret=api.api_secret())
        print(f"fairqueue serve: the API listens on {server.url}", file=sys.stderr, flush=True)
        loops["api"] = lambda: _answer(server, stop)
    if "dashboard" in roles:
        board = dashboard.DashboardServer(
            dashboard.dashboard_address(), dsn, secret=dashboard.dashboard_secret(), stages=stages
        )
        print(f"fairqueue serve: the dashboard listens on {board.url}", file=sys.stderr, flush=True)
        loops["dashboard"] = lambda: _show(board, stop)
    failed: list[str] = []
    threads = [
        threading.Thread(target=_guarded(name, loops[name], stop, failed), name=f"fq-{name}")
        for name in roles
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return not failed


def _guarded(
    name: str, loop: Callable[[], None], stop: threading.Event, failed: list[str]
) -> Callable[[], None]:
    def run() -> None:
        try:
            loop()
        except Exception:
            # One broken role stops the others: a supervisor restarts the whole process.
            log.exception("the %s loop stopped on an error; stopping the process", name)
            failed.append(name)
            stop.set()

    return run


def _every(interval_s: float, stop: threading.Event, step: Callable[[], None]) -> None:
    while not stop.is_set():
        step()
        stop.wait(interval_s)


def _cron(dsn: str, stages: Sequence[Stage], stop: threading.Event) -> None:
    result = run_pipeline(dsn, stages, trigger="serve", stop=stop)
    log.info("cron run %s: %s, %d done", result.run_id, result.stop_reason, result.jobs_done)


def _sweep(dsn: str, stages: Sequence[Stage]) -> None:
    result = sweep(dsn, stages)
    log.info("sweep %s: %d republished", result.run_id, result.republished)


def _rescue(backstop: Backstop, stop: threading.Event) -> None:
    result = backstop.rescue(stop)
    if result is None:
        return
    log.info("backstop: %d results written, %d hooks fired", result.written, result.hooks_fired)
    if result.render_errors or result.step_errors:
        log.warning(
            "backstop: %d results could not be saved (%d still failing), steps failed: %s",
            len(result.render_errors),
            result.results_failing,
            "; ".join(result.step_errors) or "none",
        )


def _work(dsn: str, stages: Sequence[Stage], stop: threading.Event) -> None:
    source = source_for(dsn)
    try:
        DoorbellWorker(dsn, stages, stop, source).run()
    finally:
        source.close()


def _answer(server: api.ApiServer, stop: threading.Event) -> None:
    """Serve requests until a stop is requested; closing waits for those in flight."""
    with server:
        server.serve_until(stop)


def _show(board: dashboard.DashboardServer, stop: threading.Event) -> None:
    """Serve the dashboard until a stop is requested."""
    with board:
        board.serve_until(stop)
