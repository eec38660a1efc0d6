"""Everything one run measured, and the figures its report compares."""

from __future__ import annotations

from dataclasses import dataclass

from .admission import Admission
from .caps import CapsRun
from .claim_scale import OptionCase, ScaleCase
from .claim_tenants import LevelCase
from .cost import CostRun
from .dashboard import PageRender
from .doorbells import DoorbellLatency
from .enqueue import EnqueueRun
from .fairness import FairnessResult
from .fairness_tenants import TenantFairness
from .health import TableHealth
from .latency import LatencyCase
from .machine import Machine
from .peers.workers import PeerDrain
from .schedules import ScheduleSweepRun
from .shares import SharesRun
from .sizes import Sizes
from .throughput import Drain, medians

FAIRQUEUE = "fairqueue"
# The same pipeline over jobs in many groups and tenants (the peers' jobs have neither).
FAIRQUEUE_GROUPS = "fairqueue_groups"
FAIRQUEUE_GROUPS_Q4 = "fairqueue_groups_q4"
FAIRQUEUE_WIDEST_Q4 = "fairqueue_widest_q4"
# fairqueue's drains, each compared with every other system.
FAIRQUEUE_DRAINS = (FAIRQUEUE, FAIRQUEUE_GROUPS, FAIRQUEUE_GROUPS_Q4, FAIRQUEUE_WIDEST_Q4)
BARE = "bare"


@dataclass(frozen=True)
class Results:
    mode: str
    machine: Machine
    # library_fingerprint() when the run started, and whether it differed when it ended.
    library: str
    library_changed: bool
    sizes: Sizes
    # How each system's workers ran, for the report, by system name.
    settings: dict[str, str]
    throughput: list[Drain]
    peer_drains: list[PeerDrain]
    latency: list[LatencyCase]
    # Claim latency against the groups with pending work, fewest groups first.
    claim_scale: list[ScaleCase]
    # The same at the fewest and the most groups for each option on the order (quantum, shares).
    claim_options: list[OptionCase]
    fairness: list[FairnessResult]
    # A tenant gaming the order with many groups: fairqueue at each level, then the peers.
    tenant_fairness: list[TenantFairness]
    # Claim latency by group and by tenant on one backlog, group first.
    tenant_claim: list[LevelCase]
    health: list[TableHealth]
    enqueue: list[EnqueueRun]
    # POST /jobs through the local API, direct and through PgBouncer.
    admission: Admission
    # From an enqueue's commit to its handler's start: fairqueue's doorbells, then pgqueuer's.
    doorbells: list[DoorbellLatency]
    # One sweep of the schedules at each count of schedules.
    schedules: list[ScheduleSweepRun]
    # Weighted shares: two plans of weights 3 and 1 under shares, and the priority drain.
    shares: list[SharesRun]
    # Fairness by cost: two tenants whose jobs cost 100 and 1 under fair_by="cost".
    cost: list[CostRun]
    # Caps per tenant: one capped tenant beside uncapped ones, with and without the cap.
    caps: list[CapsRun]
    # Each dashboard page's time at 100,000 groups and a million finished jobs.
    dashboard: list[PageRender]
    elapsed_s: float

    @property
    def drains(self) -> list[Drain]:
        """One run per loop and invocation count: the median of the repeats."""
        return medians(self.throughput)

    @property
    def peer_medians(self) -> list[PeerDrain]:
        """One run per peer and worker count: the median of the repeats (the lower middle)."""
        runs: dict[tuple[str, int], list[PeerDrain]] = {}
        for d in self.peer_drains:
            runs.setdefault((d.peer, d.workers), []).append(d)
        return [
            sorted(group, key=lambda d: d.done_per_s)[(len(group) - 1) // 2]
            for group in runs.values()
        ]

    @property
    def systems(self) -> list[str]:
        """Every system drained, in report order: the ceiling, fairqueue (the peers' jobs, then
        jobs in many groups, then the same with a quantum of 4), then the peers."""
        peers = dict.fromkeys(d.peer for d in self.peer_drains)
        return [BARE, *FAIRQUEUE_DRAINS, *peers]

    def rate(self, system: str, workers: int) -> float | None:
        """Completed jobs per second of a system's drain with `workers` workers."""
        for d in self.drains:
            if d.loop == system and d.invocations == workers:
                return d.done_per_s
        for p in self.peer_medians:
            if p.peer == system and p.workers == workers:
                return p.done_per_s
        return None

    def best(self, system: str) -> tuple[float, int]:
        """A system's best drain rate and the worker count it came with."""
        rates = [(self.rate(system, n), n) for n in self.sizes.invocations]
        found = [(r, n) for r, n in rates if r is not None]
        if not found:
            raise LookupError(f"no drain of {system}")
        return max(found)

    def bare_rate(self, invocations: int) -> float:
        found = self.rate(BARE, invocations)
        if found is None:
            raise LookupError(f"no bare run with {invocations} invocations")
        return found

    def vs_bare(self, drain: Drain) -> float:
        return drain.done_per_s / self.bare_rate(drain.invocations)

    def latency_case(self, pending: int, history: int) -> LatencyCase | None:
        for c in self.latency:
            if (c.pending, c.history) == (pending, history) and c.first_claim_ms is None:
                return c
        return None

    @property
    def last_day(self) -> list[LatencyCase]:
        """The last-day history cases (not the expired one)."""
        return [c for c in self.latency if c.first_claim_ms is None]
