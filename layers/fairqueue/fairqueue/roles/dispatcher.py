"""The long-running doorbell worker (``fairqueue serve --role worker``): a doorbell's job starts
the moment the doorbell is heard.

A reader thread takes doorbells off their source (fairqueue.doorbells.receiving) and hands them
over as they come. The dispatcher takes them with every other doorbell then waiting, claims all
their jobs in one statement (worker.claim_doorbells: only a pending, due job of the doorbell's
tenant, so a duplicate, late or foreign doorbell claims nothing), and starts each stage's jobs
as one batch on a thread of its own, with ``Run.run_batch`` as every other runner does. It
never waits for more doorbells to fill a batch: one doorbell heard alone is a batch of one.

A stage runs at most its ``concurrency`` handlers at once, over all its batches. A batch takes
as many of the stage's free slots as it has jobs; a stage with none free is left out of the
next claim, and the doorbells that claimed nothing while some stage was left out are tried again
once a batch ends (still nothing then: dropped). The doorbells heard while every stage is busy
wait in this process, and are claimed together, up to DOORBELLS_PER_CLAIM in one statement, when
a batch's handlers have returned; so a burst costs a claim per batch rather than per doorbell.
A batch's slots are free once its handlers have returned: its outcomes are recorded on its run's
connection while the next claim runs on the dispatcher's own.

The run rows: one per span of work, not per batch (fairqueue.roles.spans). A stop request lets
the handlers in flight finish, gives back the claimed jobs whose handlers had not started, and
closes the rows; the doorbells heard but not claimed are the sweep's, as any lost doorbell is. A
lost connection stops nothing: the Postgres source listens again on a new one
(fairqueue.doorbells.receiving), the claim is made again on a new one, and a batch that lost its
run's connection records its outcomes on a new one and closes its row with the fault. Any other
error stops the worker, and the process, for its supervisor to start again.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import psycopg

from ..db import Connection
from ..doorbells import Doorbell
from ..doorbells.receiving import DoorbellSource
from ..errors import ConfigurationError, ConnectionLost
from ..pipeline.claim import ClaimedJob
from ..pipeline.connections import connect_retrying
from ..stage import Stage
from .spans import IDLE_S, SPAN_S, Span, Spans
from .worker import claim_doorbells

log = logging.getLogger("fairqueue.worker")

# How long the dispatcher and the reader wait before they look at the stop flag again.
POLL_S = 1.0
# The most doorbells one claim takes: a burst of them is one statement, not one per batch.
DOORBELLS_PER_CLAIM = 1000


class DoorbellWorker:
    def __init__(
        self,
        dsn: str,
        stages: Sequence[Stage],
        stop: threading.Event,
        source: DoorbellSource,
        *,
        span_s: float = SPAN_S,
        idle_s: float = IDLE_S,
    ) -> None:
        self.dsn = dsn
        self.stages = {s.name: s for s in stages if s.delivery == "doorbell"}
        if not self.stages:
            raise ConfigurationError(
                "a doorbell worker needs at least one Stage with delivery='doorbell'"
            )
        self.stop = stop
        self.source = source
        self.spans = Spans(dsn, stages, stop, span_s=span_s, idle_s=idle_s)
        # Doorbells heard, from the reader; an empty list says a batch ended.
        self._events: queue.SimpleQueue[list[Doorbell]] = queue.SimpleQueue()
        self._waiting: list[Doorbell] = []
        # Doorbells that claimed nothing while a busy stage was left out of the claim.
        self._again: list[Doorbell] = []
        self._lock = threading.Lock()
        self._busy = dict.fromkeys(self.stages, 0)
        self._failure: BaseException | None = None
        # The dispatcher's own connection, for claims alone: they never wait behind a batch
        # recording its outcomes on its span's connection.
        self._claims: Connection | None = None

    def run(self) -> None:
        """Work until ``stop`` is set, then wind down; an error that stopped it is raised."""
        self._claims = connect_retrying(self.dsn)
        reader = threading.Thread(target=self._read, name="fq-doorbells")
        # A thread for each slot, and as many again for batches whose handlers have returned
        # and whose outcomes are being recorded while the next batches run.
        threads = 2 * sum(s.concurrency for s in self.stages.values())
        pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fq-doorbell-batch")
        reader.start()
        try:
            while not self.stop.is_set():
                self._take(POLL_S)
                self._dispatch(pool)
                self.spans.retire_due()
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            reader.join()
            pool.shutdown()
            self.spans.close()
            self._claims.close()
            self._claims = None
        if self._failure is not None:
            raise self._failure

    def _read(self) -> None:
        try:
            while not self.stop.is_set():
                heard = self.source.take(POLL_S)
                if heard:
                    self._events.put(heard)
        except Exception as exc:
            log.exception("the doorbell worker could not read its doorbells")
            self._fail(exc)

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            self._failure = self._failure or error
        self.stop.set()
        self._events.put([])

    def _take(self, timeout_s: float) -> None:
        """Wait for a doorbell or a batch's end, unless there is work to claim now; then take
        every event waiting."""
        events: list[list[Doorbell]] = []
        if not (self._waiting and self._free()):
            try:
                events.append(self._events.get(timeout=timeout_s))
            except queue.Empty:
                return
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                break
        for heard in events:
            if not heard and self._again:  # a batch ended: its stage may take them now
                self._waiting[:0], self._again = self._again, []
            self._waiting += heard

    def _free(self) -> dict[str, int]:
        with self._lock:
            return {
                name: stage.concurrency - self._busy[name]
                for name, stage in self.stages.items()
                if self._busy[name] < stage.concurrency
            }

    def _dispatch(self, pool: ThreadPoolExecutor) -> None:
        """Claim what waits for the stages with a free slot, up to DOORBELLS_PER_CLAIM in each
        statement, and start it."""
        while self._waiting and not self.stop.is_set():
            free = self._free()
            if not free:
                return
            limit = DOORBELLS_PER_CLAIM
            bells, self._waiting = self._waiting[:limit], self._waiting[limit:]
            span, claimed = self._claim(bells, [self.stages[name] for name in free])
            taken = {job.id for job in claimed}
            again = []
            if len(free) < len(self.stages):
                again = [bell for bell in bells if bell.job_id not in taken]
                self._again += again
            tally = span.run.tally
            tally.count("doorbells_ran", len(claimed))
            if dropped := len(bells) - len(claimed) - len(again):
                tally.count("doorbells_dropped", dropped)
                log.info("dropped %d doorbell(s): nothing of their tenants to claim", dropped)
            by_stage: dict[str, list[ClaimedJob]] = {}
            for job in claimed:
                by_stage.setdefault(job.type, []).append(job)
            for name, jobs in by_stage.items():
                self._start(pool, span, self.stages[name], jobs, min(free[name], len(jobs)))

    def _claim(self, bells: list[Doorbell], stages: list[Stage]) -> tuple[Span, list[ClaimedJob]]:
        """Claim for the open span. Should the claim's connection be found lost (a restart of
        the server), it is opened again, with a new span, and the claim made once more: a claim
        whose answer was lost took its jobs for a span no one runs, and they come back when their
        lease runs out."""
        claims = self._claims
        assert claims is not None, "claims are made inside run()"
        span = self.spans.for_claim()
        try:
            return span, claim_doorbells(claims, span.run, bells, stages)
        except psycopg.OperationalError as exc:
            if not (claims.closed or claims.broken):
                raise
            log.warning("the doorbell worker lost its connection: %s; reconnecting", exc)
        claims.close()
        self._claims = connect_retrying(self.dsn)
        self.spans.retire()
        span = self.spans.for_claim()
        return span, claim_doorbells(self._claims, span.run, bells, stages)

    def _start(
        self, pool: ThreadPoolExecutor, span: Span, stage: Stage, jobs: list[ClaimedJob], slots: int
    ) -> None:
        with self._lock:
            self._busy[stage.name] += slots
        self.spans.batch_started(span)
        pool.submit(self._run_batch, span, stage, jobs, slots)

    def _run_batch(self, span: Span, stage: Stage, jobs: list[ClaimedJob], slots: int) -> None:
        error: BaseException | None = None
        freed = threading.Event()

        def free_slots() -> None:
            # The slots are the handlers': the next claim need not wait for this batch's
            # outcomes to be recorded, and runs beside that on its own connection.
            if not freed.is_set():
                freed.set()
                with self._lock:
                    self._busy[stage.name] -= slots
                self._events.put([])

        try:
            span.run.run_batch(stage, jobs, concurrency=slots, handlers_done=free_slots)
        except ConnectionLost as exc:
            # The batch's outcomes are recorded, on a new connection: its row closes with the
            # fault, and the next doorbell opens a new one.
            log.warning("a doorbell batch of %s: %s", stage.name, exc)
            error = exc
            self.spans.retire(only=span)
        except Exception as exc:
            # As a Lambda invocation would: the row closes with the error, and the process
            # stops for its supervisor to start again.
            log.exception("a doorbell batch of %s stopped on an error", stage.name)
            error = exc
            self._fail(exc)
        finally:
            free_slots()
            self.spans.batch_ended(span, error)
            self._events.put([])
