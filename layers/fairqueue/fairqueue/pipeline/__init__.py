"""The cron loop: claim a batch from the first stage that can work, run it, start again at the top.

A stage whose quota is at its reserve or empty is passed over, and the stages after it go on.
The loop stops on the first of: no stage has work (``no_work``), the time budget cannot fit the
next batch (``time_budget``), every stage with work is held by its quota (``quota_reserve``,
``quota_exhausted``, the first such stage's). An error of the loop itself closes the run with
``error``. Handler errors are job failures, never run errors.

The folder holds what a run does with its jobs: ``run`` (one invocation and its row),
``connections``, ``claim``, ``executor`` (the handlers), ``outcomes`` (every transition after
the claim), ``leases``, ``trailing`` (a completion beside the next claim) and ``give_ups``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg

from .. import quotas
from ..db import Connection
from ..errors import ConnectionLost, describe
from ..plans import PLANS, Plans
from ..runs import StopReason
from ..settings import settings
from ..stage import Stage
from . import claim
from .run import DEFAULT_MARGIN_S, LambdaContextLike, Run, RunResult, budget_seconds, invocation

log = logging.getLogger("fairqueue.pipeline")

DEFAULT_TIME_BUDGET_S = 220.0


class Pipeline:
    """The loop over one run's stages."""

    def __init__(self, run: Run) -> None:
        self.run = run
        run.completions_trail = settings().completion_trails
        # Whether a claim may pass a tenant over at its cap (Plan.max_running).
        self.capped = any(plan.max_running is not None for plan in run.plans.plans)

    def loop(self) -> StopReason:
        """Passes until one gives a reason to stop; then the last batch's completion, which
        trails the passes (fairqueue.pipeline.trailing), is waited for, and an error recording
        it is the run's."""
        run = self.run
        run.outcomes.fail_abandoned()
        while True:
            if run.stop is not None and run.stop.is_set():
                run.tally.interrupted = "stop requested"
                reason: StopReason = "time_budget"
                break
            try:
                trailing = run.trailing.in_flight
                found = self.one_pass()
                if found == "no_work" and self.capped and trailing:
                    # The claim passes over a tenant at its cap, and this run's last batch,
                    # whose completion trailed the claim, may be what held it there: once that
                    # completion is recorded, one more look.
                    run.trailing.wait()
                    found = self.one_pass()
            except psycopg.OperationalError as exc:
                if not run.db.broken:
                    raise
                # Found lost at a claim: the batches before it were recorded (the last one on
                # the trailing connection), and the run stops as it does when a completion
                # finds it lost.
                raise ConnectionLost(
                    f"the run's connection was lost ({describe(exc)}) before its next claim;"
                    " the outcomes of its batches so far were recorded, and it stopped"
                ) from exc
            if found is not None:
                reason = found
                break
        run.trailing.wait()
        return reason

    def one_pass(self) -> StopReason | None:
        """Claim and run one batch from the first stage that can work now; a reason to stop, or
        None to start again at the top.

        A stage whose quota is at its reserve or empty is passed over for this pass (its hold
        and the quota's reset time go into the summary), so stages that spend something else
        keep working. The run stops on a quota only when every stage with claimable work is
        held by one, naming the first such stage's reason.
        """
        run = self.run
        held: StopReason | None = None
        for stage in run.stages:
            fits = self.batch_fits(stage)
            if stage.quota is not None or not fits:
                # A stop that concerns this stage counts only if it has work to stop.
                with run.db.use() as conn:
                    if not claim.has_claimable(conn, stage.name):
                        continue
                    state = quotas.read_quota(conn, stage.quota) if stage.quota else None
                quota_stop = state.stop_reason() if state else None
                if state is not None and quota_stop is not None:
                    run.tally.stage(stage.name).hold(quota_stop, state.name, state.resets_at)
                    held = held or quota_stop
                    continue
                if not fits:
                    return "time_budget"
            with run.db.use() as conn:
                claimed = claim.claim_batch(
                    conn,
                    stage.name,
                    batch=stage.batch,
                    lease_s=stage.lease_s,
                    locked_by=run.locked_by,
                    run_id=run.run_id,
                    plans=run.plans,
                    fair_share=stage.fair_share,
                    quantum=stage.quantum,
                    order=stage.order,
                    fair_by=stage.fair_by,
                )
            if claimed:
                run.run_batch(stage, claimed)
                return None
        return held or "no_work"

    def batch_fits(self, stage: Stage) -> bool:
        """Never start a batch that cannot finish inside the budget."""
        remaining = self.run.seconds_left()
        return remaining > 0 and self.run.seconds_needed(stage, stage.batch) <= remaining


def run_pipeline(
    dsn: str | None,
    stages: Sequence[Stage],
    *,
    time_budget_s: float = DEFAULT_TIME_BUDGET_S,
    trigger: str = "manual",
    context: LambdaContextLike | None = None,
    conn: Connection | None = None,
    stop: threading.Event | None = None,
    plans: Plans = PLANS,
    margin_s: float = DEFAULT_MARGIN_S,
    summary: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run one invocation of the cron pipeline and write its one ``runs`` row.

    ``summary`` is recorded on the row as it opens (the cron function records the tick that
    started it there).
    """
    budget = budget_seconds(time_budget_s, context, margin_s)
    with invocation(
        dsn,
        stages,
        trigger=trigger,
        conn=conn,
        deadline=time.monotonic() + budget,
        stop=stop,
        plans=plans,
        opening_summary={**(summary or {}), "budget_s": round(budget, 3)},
    ) as run:
        try:
            run.stop_reason = Pipeline(run).loop()
        except Exception as exc:
            log.exception("run %s stopped on an error", run.run_id)
            run.stop_reason, run.error = "error", describe(exc)
    return run.result()
