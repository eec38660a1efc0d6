"""How big each workload is: the full run (``make bench``) and the seconds-long smoke run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    mode: str
    # Who owns the work: tenants (plans mixed) and fairness groups per tenant.
    tenants: int
    groups_per_tenant: int
    # Throughput: jobs preloaded and drained per run, the stage's batch, invocations compared,
    # runs of each (the median is reported).
    throughput_jobs: int
    throughput_batch: int
    invocations: tuple[int, ...]
    repeats: int
    # Claim latency: pending kept constant, last-day history grown through `histories`.
    pending: int
    claim_batch: int
    histories: tuple[int, ...]
    expired_history: int
    samples: int
    warmup: int
    # Rows per INSERT ... SELECT generate_series transaction when loading history: small enough
    # that the served trigger's upserts stay HOT updates instead of chaining row versions.
    load_chunk: int

    @property
    def groups(self) -> int:
        return self.tenants * self.groups_per_tenant


FULL = Sizes(
    mode="full",
    tenants=200,
    groups_per_tenant=5,
    throughput_jobs=20_000,
    throughput_batch=100,
    invocations=(1, 2),
    repeats=3,
    pending=10_000,
    claim_batch=25,
    histories=(10_000, 100_000, 1_000_000),
    expired_history=1_000_000,
    samples=300,
    warmup=10,
    load_chunk=1_000,
)

SMOKE = Sizes(
    mode="smoke",
    tenants=10,
    groups_per_tenant=3,
    throughput_jobs=300,
    throughput_batch=20,
    invocations=(1, 2),
    repeats=1,
    pending=200,
    claim_batch=25,
    histories=(100, 300, 1_000),
    expired_history=1_000,
    samples=15,
    warmup=2,
    load_chunk=200,
)
