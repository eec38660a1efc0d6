"""The cron invocation as a Lambda runs it: the event, the connection, the answer."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from ..pipeline import DEFAULT_TIME_BUDGET_S, run_pipeline
from ..pipeline.run import LambdaContextLike, RunResult
from ..stage import Stage
from .function import ConnectionCache, ScheduledEvent

# Set by a local runner on Ctrl-C or SIGTERM: the job in flight finishes, the rest of its batch
# is given back, then the run closes (fairqueue.roles.stopping bounds the wait).
stop_requested = threading.Event()


class CronAnswer(BaseModel):
    """The function's return value."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    run_id: str = Field(alias="runId")
    stop_reason: str = Field(alias="stopReason")
    jobs_done: int = Field(alias="jobsDone")
    jobs_failed: int = Field(alias="jobsFailed")
    jobs_deferred: int = Field(alias="jobsDeferred")
    units: int
    error: str | None = None

    @classmethod
    def of(cls, result: RunResult) -> CronAnswer:
        return cls(
            run_id=str(result.run_id),
            stop_reason=result.stop_reason,
            jobs_done=result.jobs_done,
            jobs_failed=result.jobs_failed,
            jobs_deferred=result.jobs_deferred,
            units=result.units,
            error=result.error,
        )


def invoke(
    cache: ConnectionCache,
    stages: Sequence[Stage],
    event: ScheduledEvent,
    context: LambdaContextLike | None,
) -> RunResult:
    """One cron invocation over the cached connection; the run row records the tick."""
    conn = cache.get()
    return run_pipeline(
        cache.dsn,
        stages,
        time_budget_s=event.time_budget_s or DEFAULT_TIME_BUDGET_S,
        trigger=event.run_trigger,
        context=context,
        conn=conn,
        stop=stop_requested,
        summary=event.schedule_context(),
    )
