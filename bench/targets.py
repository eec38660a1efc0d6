"""The issue's targets, reported (never asserted): each met or not, with its figures.

Drain targets compare each system at its best worker count; the latency target compares the
claim's p99 at the largest history with its p99 at the second size (10M against 100k in the
full run), for each pending backlog; the claim-against-groups target compares the claim's p99
at the most groups with pending work with its p99 at the fewest (100,000 against 100 in the
full run); the fairness target is fairqueue's mean Jain's index over the scored windows,
beside each peer's; the tenant-level targets take fair_share="tenant" against "group" on the
gaming workload (Jain's index over tenants, and the longest wait of a small tenant) and on one
backlog (the claim's p99); the enqueue target compares enqueue_many with pgqueuer's batch
enqueue, the same number of jobs per call, median against median; the admission targets
compare POST /jobs at 16 clients with 1 client (one API process, direct), and through
PgBouncer with direct at the most clients (rate, and the server connections each used), each
way a fleet of one-connection API processes, one per client; the doorbell targets compare
fairqueue's Postgres doorbells with pgqueuer's NOTIFY path, the start's p99 at one job every 50
ms and a burst's jobs per second.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import (
    admission_report,
    caps,
    claim_scale,
    claim_tenants,
    cost,
    dashboard,
    doorbells,
    enqueue,
    fairness_tenants,
    schedules,
    shares,
)
from .formats import title
from .results import (
    BARE,
    FAIRQUEUE,
    FAIRQUEUE_GROUPS,
    FAIRQUEUE_GROUPS_Q4,
    FAIRQUEUE_WIDEST_Q4,
    Results,
)

MIN_JAIN = 0.99
MAX_P99_GROWTH = 2.0
# A doorbell job's start, commit to handler, against pgqueuer's NOTIFY path in the same run.
MAX_DOORBELL_P99_OVER_PGQUEUER = 2.0


@dataclass(frozen=True)
class Target:
    goal: str
    fairqueue: str
    other: str
    ratio: float
    met: bool


def _drain(
    results: Results, system: str, goal: str, at_least: float, ours_as: str = FAIRQUEUE
) -> Target | None:
    try:
        theirs, their_workers = results.best(system)
        ours, our_workers = results.best(ours_as)
    except LookupError:
        return None
    ratio = ours / theirs
    return Target(
        goal=goal,
        fairqueue=f"{ours:,.0f} jobs/s (x{our_workers})",
        other=f"{title(system)} {theirs:,.0f} jobs/s (x{their_workers})",
        ratio=ratio,
        met=ratio >= at_least,
    )


def _latency(results: Results) -> list[Target]:
    histories = results.sizes.histories
    if len(histories) < 2:
        return []
    base, top = histories[1], histories[-1]
    found = []
    for pending in results.sizes.pendings:
        low = results.latency_case(pending, base)
        high = results.latency_case(pending, top)
        if low is None or high is None:
            continue
        ratio = high.p99_ms / low.p99_ms
        found.append(
            Target(
                goal=f"claim p99 at {top:,} history <= {MAX_P99_GROWTH:g}x its value at"
                f" {base:,} ({pending:,} pending)",
                fairqueue=f"{high.p99_ms:.1f} ms",
                other=f"{low.p99_ms:.1f} ms at {base:,}",
                ratio=ratio,
                met=ratio <= MAX_P99_GROWTH,
            )
        )
    return found


def _claim_scale(results: Results) -> list[Target]:
    cases = sorted(results.claim_scale, key=lambda c: c.groups)
    if len(cases) < 2:
        return []
    low, high = cases[0], cases[-1]
    ratio = high.p99_ms / low.p99_ms
    return [
        Target(
            goal=f"claim p99 at {high.groups:,} groups within {MAX_P99_GROWTH:g}x of p99 at"
            f" {low.groups:,} groups (batch {high.batch}, claimed and read)",
            fairqueue=f"{high.p99_ms:.1f} ms",
            other=f"{low.p99_ms:.1f} ms at {low.groups:,} groups",
            ratio=ratio,
            met=ratio <= MAX_P99_GROWTH,
        )
    ]


def _claim_options(results: Results) -> list[Target]:
    cases = results.claim_options
    found = []
    for name, growth in claim_scale.option_growth(cases).items():
        mine = sorted((c for c in cases if c.option == name), key=lambda c: c.groups)
        low, high = mine[0], mine[-1]
        found.append(
            Target(
                goal=f"claim p99 with {name} at {high.groups:,} groups within"
                f" {MAX_P99_GROWTH:g}x of p99 at {low.groups:,} groups",
                fairqueue=f"{high.p99_ms:.1f} ms",
                other=f"{low.p99_ms:.1f} ms at {low.groups:,} groups",
                ratio=growth,
                met=growth <= MAX_P99_GROWTH,
            )
        )
    return found


def _fairness(results: Results) -> list[Target]:
    ours = next((f for f in results.fairness if f.system == FAIRQUEUE), None)
    if ours is None:
        return []
    peers = [f for f in results.fairness if f.system != FAIRQUEUE]
    lowest = min((f.jain_mean for f in peers), default=None)
    return [
        Target(
            goal=f"Jain's index under skew >= {MIN_JAIN} (mean of scored windows), FIFO far below",
            fairqueue=f"{ours.jain_mean:.3f} (worst window {ours.jain_min:.3f})",
            other=", ".join(f"{f.system} {f.jain_mean:.3f}" for f in peers) or "-",
            ratio=ours.jain_mean / lowest if lowest else 1.0,
            met=ours.jain_mean >= MIN_JAIN,
        )
    ]


def _tenant_fairness(results: Results) -> list[Target]:
    found = results.tenant_fairness
    ours = fairness_tenants.by_system(found, fairness_tenants.SYSTEMS["tenant"])
    if ours is None:
        return []
    others = [f for f in found if f is not ours]
    lowest = min((f.jain_mean for f in others), default=None)
    targets = [
        Target(
            goal=f'Jain over tenants >= {MIN_JAIN} for fair_share="tenant" (mean of scored'
            f" windows; one tenant over {ours.gaming_groups:,} groups)",
            fairqueue=f"{ours.jain_mean:.3f} (worst window {ours.jain_min:.3f})",
            other=", ".join(f"{title(f.system)} {f.jain_mean:.3f}" for f in others) or "-",
            ratio=ours.jain_mean / lowest if lowest else 1.0,
            met=ours.jain_mean >= MIN_JAIN,
        )
    ]
    group = fairness_tenants.by_system(found, fairness_tenants.SYSTEMS["group"])
    if group is not None:
        targets.append(
            Target(
                goal='longest small-tenant wait under fair_share="tenant" <= under "group"'
                " (completions of others between two of its own)",
                fairqueue=f"{ours.small_wait:,} ({ours.small_wait_tenant},"
                f" {ours.small_wait_backlog:,} jobs)",
                other=f'{group.small_wait:,} under "group" ({group.small_wait_tenant},'
                f" {group.small_wait_backlog:,} jobs)",
                ratio=ours.small_wait / group.small_wait if group.small_wait else 1.0,
                met=ours.small_wait <= group.small_wait,
            )
        )
    return targets


def _tenant_claim(results: Results) -> list[Target]:
    found = claim_tenants.p99_ratio(results.tenant_claim)
    by = {c.fair_share: c for c in results.tenant_claim}
    if found is None:
        return []
    ours, group = by["tenant"], by["group"]
    limit = claim_tenants.MAX_TENANT_OVER_GROUP
    return [
        Target(
            goal=f"claim p99 by tenant within {limit:g}x of by group at {ours.groups:,} groups"
            f" over {ours.tenants:,} tenants (batch {ours.batch})",
            fairqueue=f"{ours.p99_ms:.1f} ms",
            other=f"{group.p99_ms:.1f} ms by group",
            ratio=found,
            met=found <= limit,
        )
    ]


def _enqueue(results: Results) -> list[Target]:
    found = enqueue.medians(results.enqueue)
    ours, theirs = found.get(enqueue.OURS), found.get(enqueue.THEIRS)
    if ours is None or theirs is None:
        return []
    batch = results.sizes.enqueue_batch
    ratio = ours.jobs_per_s / theirs.jobs_per_s
    return [
        Target(
            goal=f"enqueue in batches of {batch:,} at least matches pgqueuer's batch enqueue"
            " in the same run",
            fairqueue=f"{ours.jobs_per_s:,.0f} jobs/s (enqueue_many, {batch:,} per call)",
            other=f"pgqueuer {theirs.jobs_per_s:,.0f} jobs/s ({batch:,} per call)",
            ratio=ratio,
            met=ratio >= 1.0,
        )
    ]


def _admission(results: Results) -> list[Target]:
    found = results.admission
    targets = []
    few, many = admission_report.CLIENTS_COMPARED
    one, more = found.level("direct", few), found.level("direct", many)
    limit = admission_report.MAX_P99_MS
    if one is not None and more is not None and one.per_s:
        ratio = more.per_s / one.per_s
        targets.append(
            Target(
                goal=f"admission (POST /jobs, direct) at {many} clients >= {few} client's rate,"
                f" p99 < {limit:g} ms",
                fairqueue=f"{more.per_s:,.0f}/s, p99 {more.p99_ms:.1f} ms ({many} clients)",
                other=f"{one.per_s:,.0f}/s, p99 {one.p99_ms:.1f} ms ({few} client)",
                ratio=ratio,
                met=ratio >= 1.0 and more.p99_ms < limit,
            )
        )
    # The pooler's saving is for many processes of one connection each, as the API runs on
    # Lambda: one multi-threaded process direct opens only as many as it has requests in flight.
    most = max(results.sizes.admission_fleet_clients, default=0)
    pooled, direct = found.level("fleet_pooled", most), found.level("fleet", most)
    share, connections = admission_report.MIN_POOLED_SHARE, admission_report.SERVER_CONNECTION_SHARE
    if pooled is not None and direct is not None and direct.per_s and pooled.per_s:
        ratio = pooled.per_s / direct.per_s
        few_enough = pooled.server_connections <= connections * direct.server_connections
        targets.append(
            Target(
                goal=f"admission through PgBouncer >= {share:g}x direct at {most} clients, with"
                f" <= {connections:g}x its server connections (a fleet of {most} one-connection"
                " API processes each way)",
                fairqueue=f"{pooled.per_s:,.0f}/s, {pooled.server_connections} server connections",
                other=f"direct {direct.per_s:,.0f}/s, {direct.server_connections} server"
                " connections",
                ratio=ratio,
                met=ratio >= share and few_enough,
            )
        )
    return targets


def _doorbells(results: Results) -> list[Target]:
    ours = doorbells.by_system(results.doorbells, doorbells.FAIRQUEUE)
    theirs = doorbells.by_system(results.doorbells, "pgqueuer")
    if ours is None or theirs is None:
        return []
    limit = MAX_DOORBELL_P99_OVER_PGQUEUER
    p99 = ours.p99_ms / theirs.p99_ms
    burst = ours.burst_per_s / theirs.burst_per_s
    return [
        Target(
            goal=f"doorbell job start p99 (commit to handler, one job every {ours.pace_ms:g} ms)"
            f" <= {limit:g}x pgqueuer's",
            fairqueue=f"{ours.p99_ms:.1f} ms (p50 {ours.p50_ms:.1f} ms)",
            other=f"pgqueuer {theirs.p99_ms:.1f} ms (p50 {theirs.p50_ms:.1f} ms)",
            ratio=p99,
            met=p99 <= limit,
        ),
        Target(
            goal=f"a burst of {ours.burst_jobs:,} doorbell jobs started at least as fast as"
            " pgqueuer starts it",
            fairqueue=f"{ours.burst_per_s:,.0f} jobs/s (last start {ours.burst_last_start_ms:,.0f}"
            " ms)",
            other=f"pgqueuer {theirs.burst_per_s:,.0f} jobs/s (last start"
            f" {theirs.burst_last_start_ms:,.0f} ms)",
            ratio=burst,
            met=burst >= 1.0,
        ),
    ]


def _schedules(results: Results) -> list[Target]:
    found = schedules.medians(results.schedules)
    ratio = schedules.growth(results.schedules)
    if ratio is None:
        return []
    fewest, most = found[0], found[-1]
    return [
        Target(
            goal=f"one sweep of {most.schedules:,} schedules, {most.due:,} due, under"
            f" {schedules.MAX_SWEEP_S:g} s and within {schedules.MAX_GROWTH:g}x its time at"
            f" {fewest.schedules:,}",
            fairqueue=f"{most.seconds:.3f} s ({most.schedules:,} schedules)",
            other=f"{fewest.seconds:.3f} s ({fewest.schedules:,} schedules)",
            ratio=ratio,
            met=most.seconds < schedules.MAX_SWEEP_S and ratio <= schedules.MAX_GROWTH,
        )
    ]


def _shares(results: Results) -> list[Target]:
    found = shares.figures(results.shares)
    error, jain, dry = found["ratio_error"], found["jain_min"], found["dry_over_plain"]
    if error is None or jain is None or dry is None:
        return []
    return [
        Target(
            goal=f"shares: plans of weights 3 and 1 served 3:1 in every round's window within"
            f" {shares.MAX_RATIO_ERROR:.0%}, Jain's index of weight-normalised service at least"
            f" {shares.MIN_JAIN:g}",
            fairqueue=f"worst window {error:.1%} off 3:1",
            other=f"lowest Jain {jain:.3f}",
            ratio=jain,
            met=error <= shares.MAX_RATIO_ERROR and jain >= shares.MIN_JAIN,
        ),
        Target(
            goal="shares: once the weight-3 plan runs dry the weight-1 plan drains at the plain"
            f" fair drain's rate (at least {shares.MIN_DRY_RATE:g} of it)",
            fairqueue=f"{found['dry_per_s'] or 0:,.0f} jobs/s (weight 1 alone)",
            other=f"{found['plain_per_s'] or 0:,.0f} jobs/s (order=priority, both plans)",
            ratio=dry,
            met=dry >= shares.MIN_DRY_RATE,
        ),
    ]


def _cost(results: Results) -> list[Target]:
    error = cost.figures(results.cost)["ratio_error"]
    if error is None:
        return []
    return [
        Target(
            goal=f"cost: tenants whose jobs cost {cost.COSTS[cost.DEAR]} and"
            f" {cost.COSTS[cost.CHEAP]} served equal cost in every window within"
            f" {cost.MAX_RATIO_ERROR:.0%}",
            fairqueue=f"worst window {error:.1%} off 1:1",
            other="1:1",
            ratio=1 + error,
            met=error <= cost.MAX_RATIO_ERROR,
        )
    ]


def _caps(results: Results) -> list[Target]:
    found = caps.figures(results.caps)
    ratio, most = found["others_ratio"], found["most_running"]
    if ratio is None or most is None:
        return []
    return [
        Target(
            goal=f"caps: a tenant capped at {caps.CAP} running never runs more, and the other"
            f" tenants drain within {1 - caps.MIN_OTHERS_RATIO:.0%} of an uncapped run",
            fairqueue=f"{found['capped_per_s'] or 0:,.0f} jobs/s (others, capped tenant at most"
            f" {most:g} running)",
            other=f"{found['uncapped_per_s'] or 0:,.0f} jobs/s (others, no cap)",
            ratio=ratio,
            met=ratio >= caps.MIN_OTHERS_RATIO and most <= caps.CAP,
        )
    ]


def _dashboard(results: Results) -> list[Target]:
    found = dashboard.slowest(results.dashboard)
    if found is None:
        return []
    return [
        Target(
            goal=f"every dashboard page under {dashboard.MAX_PAGE_S * 1000:.0f} ms at"
            f" {found.groups:,} groups and {found.finished:,} finished jobs",
            fairqueue=f"slowest {found.path} {found.median_s * 1000:,.0f} ms",
            other=f"bound {dashboard.MAX_PAGE_S * 1000:.0f} ms",
            ratio=dashboard.MAX_PAGE_S / found.median_s,
            met=found.median_s < dashboard.MAX_PAGE_S,
        )
    ]


def evaluate(results: Results) -> list[Target]:
    goals = [
        ("pgqueuer", "drain >= pgqueuer's best", 1.0),
        ("procrastinate", "drain >= 25x procrastinate's best", 25.0),
        (BARE, "drain >= half the bare loop's best", 0.5),
    ]
    many = " (fairqueue's jobs in many groups and tenants)"
    drains = [
        *(_drain(results, system, goal, at_least) for system, goal, at_least in goals),
        *(
            _drain(results, system, goal + many, at_least, FAIRQUEUE_GROUPS)
            for system, goal, at_least in goals
        ),
        _drain(
            results,
            "pgqueuer",
            "drain >= pgqueuer's best (fairqueue's jobs in many groups, quantum 4)",
            1.0,
            FAIRQUEUE_GROUPS_Q4,
        ),
        _drain(
            results,
            "pgqueuer",
            "drain >= 0.8 of pgqueuer's best (fairqueue's jobs in the widest load, a job a"
            " group, quantum 4)",
            0.8,
            FAIRQUEUE_WIDEST_Q4,
        ),
    ]
    return [
        *(t for t in drains if t is not None),
        *_latency(results),
        *_claim_scale(results),
        *_claim_options(results),
        *_fairness(results),
        *_tenant_fairness(results),
        *_tenant_claim(results),
        *_enqueue(results),
        *_admission(results),
        *_doorbells(results),
        *_schedules(results),
        *_shares(results),
        *_cost(results),
        *_caps(results),
        *_dashboard(results),
    ]
