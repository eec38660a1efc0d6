"""How big each workload is: the full run (``make bench``) and the seconds-long smoke run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Sizes:
    mode: str
    # Who owns the work: tenants (plans mixed) and fairness groups per tenant.
    tenants: int
    groups_per_tenant: int
    # The widest drain's tenants, each of `groups_per_tenant` groups (bench/throughput.py).
    widest_tenants: int
    # Drain: jobs preloaded and drained per run by every system, fairqueue's batch, the worker
    # counts compared, runs of each (the median is reported).
    throughput_jobs: int
    throughput_batch: int
    invocations: tuple[int, ...]
    repeats: int
    # Claim latency: each pending backlog, with last-day history grown through `histories`.
    pendings: tuple[int, ...]
    claim_batch: int
    histories: tuple[int, ...]
    expired_history: int
    samples: int
    warmup: int
    # Rows per INSERT ... SELECT generate_series statement (and transaction) when loading
    # history. Each statement moves each group's served counter once, so bigger chunks leave
    # fewer row versions of `served` behind.
    load_chunk: int
    # Fairness under skew: arrivals, the share of them the heaviest group brings, the Zipf
    # exponent over the other groups, and the completions per scored window. A window is
    # several times the groups with arrivals, so a fair share is several completions and the
    # index measures the order of service rather than rounding to whole jobs.
    fairness_jobs: int
    heavy_share: float
    zipf_exponent: float
    fairness_window: int
    # Fairness between tenants (bench/fairness_tenants.py): tenants on one plan, one of whom
    # spreads its arrivals over `gaming_groups` groups, the others one group each; arrivals in
    # all, and completions per scored window (several per tenant).
    tenant_fair_tenants: int
    gaming_groups: int
    tenant_fair_jobs: int
    tenant_fair_window: int
    # Table health: jobs churned through each system (enqueued, claimed, completed) in rounds
    # of `churn_round`, drained by `churn_workers` workers. A peer named in `peer_churn` churns
    # that many instead (one that would take too long at the full count).
    churn_jobs: int
    churn_round: int
    churn_workers: int
    peer_churn: Mapping[str, int]
    # Claim latency against groups (bench/claim_scale.py): each count of groups with pending
    # work, the claim's batch, claims timed per count and untimed claims before them.
    scale_groups: tuple[int, ...]
    scale_batch: int
    scale_samples: int
    scale_warmup: int
    # Claim by tenant beside claim by group (bench/claim_tenants.py): groups with pending work,
    # the tenants they are spread over, and claims timed at each level (after scale_warmup).
    tenant_claim_groups: int
    tenant_claim_tenants: int
    tenant_claim_samples: int
    # Enqueue: jobs of one tenant put into each system, one at a time and `enqueue_batch` per
    # call (bench/enqueue.py), each way `enqueue_repeats` times (the median is reported): a run
    # of the batch ways takes a fifth of a second, which this machine's noise moves by a third.
    enqueue_jobs: int
    enqueue_batch: int
    enqueue_repeats: int
    # Schedules (bench/schedules.py): one sweep over each count of schedules, `schedule_due` of
    # them due, `schedule_repeats` times each.
    schedule_counts: tuple[int, ...]
    schedule_due: int
    schedule_repeats: int
    # Weighted shares (bench/shares.py): `shares_jobs_per_plan` jobs of each of two plans over
    # `shares_tenants` tenants x `shares_groups_per_tenant` groups each, drained by
    # `shares_workers` pipelines, `shares_repeats` times.
    shares_tenants: int
    shares_groups_per_tenant: int
    shares_jobs_per_plan: int
    shares_workers: int
    shares_repeats: int
    # Fairness by cost (bench/cost.py): `cost_cheap_jobs` jobs of cost 1 and enough of cost 100
    # over two tenants of `cost_groups` groups each, drained by one pipeline `cost_repeats`
    # times, scored in windows of `cost_window_rounds` rounds (a round: 200 units served).
    cost_cheap_jobs: int
    cost_groups: int
    cost_window_rounds: int
    cost_repeats: int
    # Caps per tenant (bench/caps.py): `caps_jobs` jobs of `caps_tenants` uncapped tenants x
    # `caps_groups_per_tenant` groups, and `caps_capped_jobs` of one capped tenant over
    # `caps_capped_groups` groups, drained by `caps_workers` pipelines with and without the cap,
    # `caps_repeats` times.
    caps_tenants: int
    caps_groups_per_tenant: int
    caps_jobs: int
    caps_capped_jobs: int
    caps_capped_groups: int
    caps_workers: int
    caps_repeats: int
    # Admission (bench/admission.py): POST /jobs at each count of concurrent clients, each
    # client admitting untimed for the warm-up, then for the timed seconds.
    admission_clients: tuple[int, ...]
    # The same with a fleet of one-connection API processes, one per client (bench/api_fleet.py);
    # each level starts a fleet, so the smoke run keeps to the smallest.
    admission_fleet_clients: tuple[int, ...]
    admission_warmup_s: float
    admission_seconds: float
    # run_pipeline processes draining `throughput_jobs` direct and through PgBouncer
    # (bench/pooled_pipelines.py).
    pooled_pipelines: int
    # Doorbells (bench/doorbells.py): jobs enqueued one at a time `doorbell_pace_s` apart after
    # `doorbell_warmup` uncounted ones, then a burst enqueued at once.
    doorbell_jobs: int
    doorbell_pace_s: float
    doorbell_warmup: int
    doorbell_burst: int

    @property
    def groups(self) -> int:
        return self.tenants * self.groups_per_tenant

    def churn_for(self, system: str) -> int:
        return self.peer_churn.get(system, self.churn_jobs)


FULL = Sizes(
    mode="full",
    tenants=200,
    groups_per_tenant=5,
    widest_tenants=20_000,
    throughput_jobs=100_000,
    throughput_batch=100,
    invocations=(1, 4, 16),
    repeats=1,
    pendings=(10_000, 1_000_000),
    claim_batch=25,
    histories=(0, 100_000, 1_000_000, 10_000_000),
    expired_history=1_000_000,
    samples=300,
    warmup=10,
    load_chunk=100_000,
    fairness_jobs=50_000,
    heavy_share=0.9,
    zipf_exponent=1.0,
    fairness_window=5_000,
    tenant_fair_tenants=200,
    gaming_groups=1_000,
    tenant_fair_jobs=50_000,
    tenant_fair_window=2_000,
    churn_jobs=1_000_000,
    churn_round=100_000,
    churn_workers=4,
    # About 1,000 jobs/s here: a million would take a quarter of an hour.
    peer_churn={"procrastinate": 100_000},
    scale_groups=(100, 1_000, 10_000, 100_000),
    scale_batch=100,
    # Enough that the p99 is not simply the slowest claim (the targets hold p99s to each other).
    scale_samples=101,
    scale_warmup=5,
    tenant_claim_groups=100_000,
    tenant_claim_tenants=10_000,
    tenant_claim_samples=100,
    enqueue_jobs=10_000,
    enqueue_batch=1_000,
    enqueue_repeats=5,
    schedule_counts=(10_000, 100_000),
    schedule_due=1_000,
    schedule_repeats=5,
    shares_tenants=50,
    shares_groups_per_tenant=10,
    shares_jobs_per_plan=20_000,
    shares_workers=4,
    shares_repeats=3,
    cost_cheap_jobs=50_000,
    cost_groups=5,
    cost_window_rounds=100,
    cost_repeats=3,
    caps_tenants=50,
    caps_groups_per_tenant=10,
    caps_jobs=20_000,
    caps_capped_jobs=2_000,
    caps_capped_groups=100,
    caps_workers=4,
    caps_repeats=3,
    admission_clients=(1, 16, 200),
    admission_fleet_clients=(1, 16, 200),
    admission_warmup_s=2.0,
    admission_seconds=10.0,
    pooled_pipelines=8,
    doorbell_jobs=200,
    doorbell_pace_s=0.05,
    doorbell_warmup=10,
    doorbell_burst=1_000,
)

SMOKE = Sizes(
    mode="smoke",
    tenants=10,
    groups_per_tenant=3,
    widest_tenants=100,
    throughput_jobs=300,
    throughput_batch=20,
    invocations=(1, 2),
    repeats=1,
    pendings=(200, 400),
    claim_batch=25,
    histories=(0, 300, 1_000),
    expired_history=1_000,
    samples=15,
    warmup=2,
    load_chunk=200,
    fairness_jobs=600,
    heavy_share=0.9,
    zipf_exponent=1.0,
    fairness_window=60,
    tenant_fair_tenants=10,
    gaming_groups=20,
    tenant_fair_jobs=600,
    tenant_fair_window=60,
    churn_jobs=400,
    churn_round=200,
    churn_workers=1,
    peer_churn={},
    scale_groups=(10, 100),
    scale_batch=20,
    scale_samples=35,
    scale_warmup=2,
    tenant_claim_groups=100,
    tenant_claim_tenants=10,
    tenant_claim_samples=20,
    enqueue_jobs=30,
    enqueue_batch=10,
    enqueue_repeats=1,
    schedule_counts=(100, 1_000),
    schedule_due=10,
    schedule_repeats=1,
    # A round (tenants x groups x 4) a whole number of batches, so windows end between claims.
    shares_tenants=5,
    shares_groups_per_tenant=2,
    shares_jobs_per_plan=120,
    shares_workers=2,
    shares_repeats=1,
    cost_cheap_jobs=3_000,
    cost_groups=2,
    cost_window_rounds=10,
    cost_repeats=1,
    caps_tenants=5,
    caps_groups_per_tenant=2,
    caps_jobs=200,
    caps_capped_jobs=20,
    caps_capped_groups=5,
    caps_workers=2,
    caps_repeats=1,
    admission_clients=(1, 16),
    admission_fleet_clients=(1,),
    admission_warmup_s=0.1,
    admission_seconds=0.4,
    # Spawning each process costs the smoke run about a second of this machine's two cores.
    pooled_pipelines=2,
    doorbell_jobs=10,
    doorbell_pace_s=0.02,
    doorbell_warmup=2,
    doorbell_burst=50,
)
