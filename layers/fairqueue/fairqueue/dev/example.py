"""The example pipeline: a small document workflow that needs no outside service.

Read top to bottom, it shows every rule of the pipeline:

- ``ingest`` is cheap and flaky: a document may fail a few times before it succeeds
  (retries with backoff), then it asks for a ``search``.
- ``search`` generates work and spends the shared ``search_api`` quota: when the quota
  cannot pay, the job is deferred until it resets (no attempt burned); while the quota is at
  its reserve the loop passes ``search`` over, and a run whose only work left is ``search``
  stops with ``quota_reserve``. It is last in the list, so the cheaper stages ahead of it
  finish what exists before more is started.
- ``summarize`` is paid work: it costs credits, and a summary that can never succeed is
  refunded by its give-up hook, which enqueues a ``refund``. Its output becomes a result a
  person reads: the watching client saves it (``play_clients``), and the backstop sweep
  rescues the rest once the grace window has passed (``render_summary`` either way).
- ``refund`` is first: money owed back goes before anything else. It is a doorbell stage: each
  refund rings a doorbell, so a worker can start it within seconds.
- ``analyze`` is admitted work (``fairqueue.lanes.admit``): a user's clicks are all accepted
  at once, each paying the stage's credits and checked by the analysis service, which holds
  the work; then they run one at a time per user, in the order clicked, each starting its held
  work when it holds the lane. The service is ``FAIRQUEUE_UPSTREAM_URL`` when set, else a
  stand-in that keeps the held work in the database (``fairqueue.dev.upstream``), so what one
  process admitted another starts; production refuses it.

The example brings its own quota: ``prepare_database`` defines ``search_api`` unless it exists
(an operator's definition is kept). ``fairqueue tick`` and ``fairqueue serve`` call it when
these are their stages, seeding does, and so does ``ingest`` in the transaction that asks for a
``search``, which is what reaches the deployed functions: they have no start-up that touches
the database.

Everything a handler does follows from its payload, and ``seed_workload`` draws payloads from
a seeded generator, so a run with the same seed does the same work.
"""

from __future__ import annotations

import logging
import random
import threading
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from ..db import Connection
from ..errors import ConfigurationError, UpstreamRejected
from ..jobs import enqueue
from ..lanes import add_credits, admit
from ..plans import set_plan
from ..quotas import define_quota_if_absent
from ..results import finished_without_result, save_result
from ..settings import settings
from ..stage import Job, Stage
from ..status import open_jobs
from ..upstream import Upstream, upstream_from_env
from .upstream import DatabaseUpstream, bind_stages

log = logging.getLogger("fairqueue.example")

SEARCH_QUOTA = "search_api"
# The example's quota where nobody defined it: small and quick to reset, so a demo shows the
# reserve and the deferrals within a minute.
SEARCH_QUOTA_CAPACITY = 32
SEARCH_QUOTA_PERIOD = timedelta(seconds=20)
SEARCH_QUOTA_RESERVE = 5
# Set once this process has seen the quota defined by someone else: committed, so it stays.
_quota_found = threading.Event()


class TransientError(Exception):
    """An upstream hiccup: worth a retry."""


class IngestPayload(BaseModel):
    doc: str = Field(min_length=1)
    failures_before_success: int = Field(default=0, ge=0, le=5)


class SearchPayload(BaseModel):
    doc: str = Field(min_length=1)
    results: int = Field(ge=0, le=5)


class SummarizePayload(BaseModel):
    doc: str = Field(min_length=1)
    result: int = Field(ge=0)
    credits: int = Field(ge=1)
    unsummarizable: bool = False


class AnalysisPayload(BaseModel):
    doc: str = Field(min_length=1)
    pages: int = Field(ge=1, le=1000)


class RefundPayload(BaseModel):
    job_id: str
    credits: int = Field(ge=1)
    reason: str


def refund(job: Job) -> None:
    payload = RefundPayload.model_validate(job.payload)
    log.info("refunding %s credits to %s for %s", payload.credits, job.tenant_id, payload.job_id)


def ingest(job: Job) -> None:
    payload = IngestPayload.model_validate(job.payload)
    if job.attempts <= payload.failures_before_success:
        raise TransientError(f"{payload.doc}: upstream timed out on attempt {job.attempts}")
    results = sum(map(ord, payload.doc)) % 4
    # The search asked for here spends search_api: wherever this runs (a deployed function
    # too), the quota exists once the search does, committed with it. Once it is seen to exist
    # already, this process stops asking (and stops opening the job's transaction).
    if not _quota_found.is_set() and job.conn is not None and not prepare_database(job.conn):
        _quota_found.set()
    job.enqueue("search", {"doc": payload.doc, "results": results}, dedupe_key=f"search:{job.id}")


def search(job: Job) -> None:
    payload = SearchPayload.model_validate(job.payload)
    job.spend(SEARCH_QUOTA, 1)
    for result in range(payload.results):
        job.enqueue(
            "summarize",
            {
                "doc": payload.doc,
                "result": result,
                "credits": 2,
                "unsummarizable": (sum(map(ord, payload.doc)) + result) % 5 == 0,
            },
        )


def summarize(job: Job) -> dict[str, Any]:
    payload = SummarizePayload.model_validate(job.payload)
    if payload.unsummarizable:
        raise ValueError(f"{payload.doc}#{payload.result}: nothing to summarize")
    # The output: what the summary's result is rendered from, by the client or the backstop.
    return {"doc": payload.doc, "result": payload.result, "sentences": 1 + payload.result % 3}


def render_summary(output: dict[str, Any]) -> dict[str, Any]:
    """The result a person reads; the client renders it the same way when it is watching."""
    sentences = output["sentences"]
    return {
        "title": f"Summary of {output['doc']}, result {output['result']}",
        "text": f"{sentences} sentence{'s' if sentences > 1 else ''} worth keeping.",
    }


# Users who have the app open in the demo: their client saves the results it sees finish.
WATCHING = frozenset({"acme"})


def play_clients(conn: Connection) -> int:
    """The demo's watching clients: save the results of their finished summaries; how many.

    The other tenants' results are left for the backstop sweep to rescue.
    """
    saved = 0
    for tenant in sorted(WATCHING):
        for job in finished_without_result(conn, tenant, "summarize"):
            save_result(conn, job["id"], render_summary(job["output"]), tenant_id=tenant)
            saved += 1
    return saved


MAX_ANALYSIS_PAGES = 200


def check_analysis(job_type: str, payload: dict[str, Any]) -> None:
    """The stand-in service's own validation: a limit the payload model does not know."""
    if payload["pages"] > MAX_ANALYSIS_PAGES:
        raise UpstreamRejected(
            f"{job_type}: {payload['pages']} pages is over the service's limit of "
            f"{MAX_ANALYSIS_PAGES}"
        )


def analysis_service() -> Upstream:
    if settings().upstream_url:
        return upstream_from_env()
    return DatabaseUpstream(validate=check_analysis)


def prepare_database(conn: Connection) -> bool:
    """What the example needs in the database before its stages run: its quota, unless it
    is defined already. Whether it was defined now."""
    defined = define_quota_if_absent(
        conn,
        SEARCH_QUOTA,
        capacity=SEARCH_QUOTA_CAPACITY,
        period=SEARCH_QUOTA_PERIOD,
        reserve=SEARCH_QUOTA_RESERVE,
    )
    if defined:
        log.info("defined the example's quota %s", SEARCH_QUOTA)
    return defined


def analyze(job: Job) -> None:
    # The service started the held work when this job took the lane (just before this call).
    payload = AnalysisPayload.model_validate(job.payload)
    log.info("analysis of %s (%d pages) started for %s", payload.doc, payload.pages, job.tenant_id)


def refund_summary(job: Job, error: str) -> None:
    """Give-up hook: paid work that will never finish is paid back."""
    credits = int(job.payload.get("credits", 0))
    if credits > 0:
        job.enqueue(
            "refund",
            {"job_id": str(job.id), "credits": credits, "reason": error[:200]},
            dedupe_key=f"refund:{job.id}",
        )


# Short retry and lease windows so `make run` shows retries and recovery within a minute.
STAGES = [
    # Refunds ring a doorbell: a worker pays them back within seconds of the give-up; the
    # cron pipeline drains any whose doorbell went missing.
    Stage("refund", batch=50, handler=refund, payload_model=RefundPayload, delivery="doorbell"),
    # Users wait on their analyses, so they come before the background stages.
    Stage(
        "analyze",
        batch=10,
        concurrency=5,
        handler=analyze,
        payload_model=AnalysisPayload,
        credit_cost=2,
        upstream=analysis_service(),
        clients_may_admit=True,
        delivery="doorbell",
    ),
    Stage(
        "summarize",
        batch=10,
        concurrency=5,
        handler=summarize,
        payload_model=SummarizePayload,
        max_attempts=2,
        backoff_unit_s=2,
        on_give_up=refund_summary,
        render_result=render_summary,
    ),
    Stage(
        "ingest",
        batch=25,
        concurrency=5,
        handler=ingest,
        payload_model=IngestPayload,
        backoff_unit_s=2,
    ),
    Stage(
        "search",
        batch=5,
        handler=search,
        payload_model=SearchPayload,
        quota=SEARCH_QUOTA,
        backoff_unit_s=2,
    ),
]

TENANTS = {"acme": "team", "globex": "pro", "initech": "free"}
# One enthusiastic user clicks five times; two others click once or twice.
CLICKS = [("acme", "ada")] * 5 + [("globex", "grace")] * 2 + [("initech", "ivan")]


def seed_workload(
    conn: Connection,
    *,
    seed: int = 7,
    documents: int = 60,
    quota_capacity: int = SEARCH_QUOTA_CAPACITY,
    quota_period: timedelta = SEARCH_QUOTA_PERIOD,
    quota_reserve: int = SEARCH_QUOTA_RESERVE,
) -> int:
    """Enqueue the example workload if the queue holds no open work; returns the documents
    enqueued (the users' admitted analyses come on top). The quota is defined with the given
    figures only where none exists: an operator's is kept. The development upstream keeps the
    analyses' held work in the connection's database.

    Needs an autocommit connection: the workload spans tenants, and one transaction works for
    one tenant.
    """
    if not conn.autocommit:
        raise ConfigurationError(
            "seed_workload needs an autocommit connection (it writes for many tenants)"
        )
    define_quota_if_absent(
        conn, SEARCH_QUOTA, capacity=quota_capacity, period=quota_period, reserve=quota_reserve
    )
    bind_stages(STAGES, conn)
    if open_jobs(conn) > 0:
        return 0
    rng = random.Random(seed)  # noqa: S311 - a reproducible demo, not a secret
    for tenant, plan in TENANTS.items():
        set_plan(conn, tenant, plan)
    for tenant in TENANTS:
        add_credits(conn, tenant, 20, note="example grant")
    for click, (tenant, user) in enumerate(CLICKS, start=1):
        admit(
            conn,
            user,
            "analyze",
            {"doc": f"{user}-report-{click}", "pages": rng.randint(1, MAX_ANALYSIS_PAGES)},
            tenant_id=tenant,
        )
    owners: list[str | None] = [*TENANTS, None]
    # A skewed mix: most documents come from one busy group.
    groups = ["busy", "steady", "quiet"]
    count = 0
    for number in range(documents):
        owner = rng.choice(owners)
        group = rng.choices(groups, weights=[8, 3, 1])[0]
        failures = rng.choices([0, 1, 2], weights=[8, 2, 1])[0]
        job_id = enqueue(
            conn,
            "ingest",
            {"doc": f"doc-{number:03d}", "failures_before_success": failures},
            tenant_id=owner,
            group_id=f"{owner or 'system'}/{group}",
            dedupe_key=f"ingest:{seed}:{number}",
        )
        count += job_id is not None
    return count
