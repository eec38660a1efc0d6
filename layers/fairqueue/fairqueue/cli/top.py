"""``fairqueue top``: the queue at a glance, redrawn every second until Ctrl-C."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import psycopg

from ..db import Connection
from ..errors import ConfigurationError, DatabaseUnavailable
from ..overview import Overview, ServedGroup, overview
from ..plans import PLANS, Plans
from .common import app_connection, visible

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text


def add_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    p = command("top", "a live view of the queue, redrawn every second (Ctrl-C to leave)")
    p.add_argument(
        "--interval", type=interval_argument, default=1.0, help="seconds between views (1)"
    )
    p.add_argument("--once", action="store_true", help="print one view and exit")
    p.set_defaults(func=cmd_top)


def interval_argument(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be from 0.1 to 3600 seconds, got {value:g}")
    return value


def cmd_top(args: argparse.Namespace) -> int:
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        raise ConfigurationError(
            "fairqueue top draws with rich, which is not installed: pip install 'fairqueue[top]'"
        ) from None
    with app_connection(args, autocommit=True) as conn:
        console = Console()
        if args.once:
            console.print(render(_look(conn), console.height))
            return 0
        try:
            with Live(render(_look(conn), console.height), auto_refresh=False) as live:
                while True:
                    time.sleep(args.interval)
                    live.update(render(_look(conn), console.height), refresh=True)
        except KeyboardInterrupt:
            return 0


def _look(conn: Connection) -> Overview:
    try:
        return overview(conn)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"lost the database: {exc}") from None


def render(view: Overview, height: int | None = None, plans: Plans = PLANS) -> RenderableType:
    """The view, its fairness panels before the runs, so that a small terminal (80x24) that
    cannot hold everything loses the last runs, not the fair order; with ``height`` (the
    terminal's lines) each panel keeps as many groups as leave both whole under the types. A
    waiting group whose tenant is at its plan's cap of running jobs (``plans``) says so.
    Every label a client chose goes in as plain text (:func:`label`): never read as markup,
    its control characters shown."""
    from rich.console import Group

    shown = max(len(view.most_served), len(view.least_served))
    if height is not None:
        # The types' table takes its rows and 5 lines; each panel 3 lines and its rows.
        shown = max(1, (height - len(view.types) - 5 - 2 * 3) // 2)
    return Group(
        _types(view),
        _groups("most served (day)", view.most_served[:shown]),
        _groups("least served, work waiting", view.least_served[:shown], plans),
        _runs(view),
    )


def label(text: str, style: str = "") -> Text:
    """Client-chosen text as rich shows it: literally (a ``[/bold]`` in a group id is its
    name, not markup), with the characters a terminal would act on made visible."""
    from rich.text import Text

    return Text(visible(text), style=style)


def _types(view: Overview) -> RenderableType:
    from rich.table import Table

    types = Table(title=f"jobs by type at {view.taken_at:%H:%M:%S %Z}", title_justify="left")
    for name in ("type", "queued", "backlog", "scheduled", "running", "stuck", "failed", "done"):
        types.add_column(name, justify="left" if name == "type" else "right")
    for t in view.types:
        types.add_row(
            label(t.type),
            str(t.queued),
            str(t.backlog),
            str(t.scheduled),
            str(t.running),
            f"[red]{t.stuck}[/]" if t.stuck else "0",
            f"[red]{t.failed}[/]" if t.failed else "0",
            str(t.done),
        )
    return types


def _runs(view: Overview) -> RenderableType:
    from rich.table import Table

    runs = Table(title="last runs", title_justify="left")
    for name in ("started", "trigger", "stop reason", "done", "failed", "deferred", "secs"):
        runs.add_column(
            name, justify="right" if name in ("done", "failed", "deferred", "secs") else "left"
        )
    runs.add_column("error", overflow="ellipsis", max_width=60)
    for r in view.runs:
        secs = (r.finished_at - r.started_at).total_seconds() if r.finished_at else None
        reason = r.stop_reason or "open"
        runs.add_row(
            f"{r.started_at:%H:%M:%S}",
            label(r.trigger),
            label(reason, "red" if reason == "error" else "yellow" if reason == "open" else ""),
            str(r.jobs_done),
            str(r.jobs_failed),
            str(r.jobs_deferred),
            "" if secs is None else f"{secs:.1f}",
            label(r.error or ""),
        )
    return runs


# How the fairness panels name the groups with no name of their own.
NO_TENANT = "(no tenant)"
DEFAULT_GROUP = "(default group)"


def _groups(title: str, groups: list[ServedGroup], plans: Plans = PLANS) -> RenderableType:
    from rich import box
    from rich.table import Table

    # Compact (no frame): both panels fit under the types in 80x24.
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1)
    )
    table.add_column("type")
    table.add_column("tenant")
    table.add_column("group")
    table.add_column("served", justify="right")
    for g in groups:
        group = label(DEFAULT_GROUP if g.group_id is None else g.group_id)
        if not g.waiting:
            group.append(" (idle)", style="dim")
        elif (
            g.tenant_id is not None
            and (cap := plans.cap_of(g.plan)) is not None
            and g.running >= cap
        ):
            group.append(f" (at cap {cap})", style="yellow")
        table.add_row(
            label(g.type),
            label(NO_TENANT if g.tenant_id is None else g.tenant_id),
            group,
            str(g.served),
        )
    return table
