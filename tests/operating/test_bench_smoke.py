"""`python -m bench --smoke` runs every workload at tiny sizes against the test's database, with
pgqueuer and procrastinate in databases of their own beside it.

Only the shape of the results is checked (every section there, every figure positive, the
chart drawn): timings on a shared CI machine say nothing, so none is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = ("pgqueuer", "procrastinate")
OURS = ("fairqueue", "fairqueue_groups", "fairqueue_groups_q4", "fairqueue_widest_q4")
SYSTEMS = ("bare", *OURS, *PEERS)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ADMISSION_WAYS = ("direct", "pooled", "fleet", "fleet_pooled")
# Every workload, each system's processes started in turn: 100 to 150 s on a busy two-core
# machine, and up to 340 s while other suites ran beside it.
SMOKE_TIMEOUT_S = 420


def run_smoke(dsn: str, out: Path) -> str:
    """The real entry point, as `make bench` runs it, with --smoke in the test's database."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--dsn", dsn, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(SMOKE_TIMEOUT_S + 10)
def test_smoke_run_has_every_section_with_positive_numbers(admin_dsn: str, tmp_path: Path) -> None:
    # The bench builds its own tables beside fairqueue's and creates the peers' databases, so
    # it runs as the superuser.
    stdout = run_smoke(admin_dsn, tmp_path)
    for heading in (
        "| machine |",
        "### Targets",
        "### Drain",
        "### Claim latency",
        "### Claim latency against groups",
        "### Fairness under skew",
        "### Table health after churn",
        "### Enqueue",
        "### Claim latency by tenant and by group",
        "### Fairness between tenants",
        "### Admission",
        "### Doorbells",
        "### Schedules",
        "### Weighted shares",
        "### Fairness by cost",
        "### Caps per tenant",
        "### Dashboard pages",
    ):
        assert heading in stdout
    for loop in ("fairqueue run_pipeline", "bare SKIP LOCKED loop", "bare loop on fairqueue.jobs"):
        assert loop in stdout
    for way in ("enqueue_many", "Queries.enqueue", "batch_defer_async", "one job per transaction"):
        assert way in stdout
    for ratio in ("fairqueue / pgqueuer", "fairqueue / procrastinate", "fairqueue / bare loop"):
        assert ratio in stdout
    assert (tmp_path / "latest.md").read_text(encoding="utf-8").strip() == stdout.strip()
    check_chart(tmp_path / "latest.png")
    results = json.loads((tmp_path / "latest.json").read_text(encoding="utf-8"))
    assert results["mode"] == "smoke"
    sizes = results["sizes"]
    check_machine(results["machine"])
    check_targets(results["targets"])
    check_throughput(results["throughput"], sizes)
    check_drain(results["drain"], results["peer_drains"], sizes)
    check_latency(results["claim_latency"], sizes)
    check_claim_scale(results["claim_scale"], sizes)
    check_claim_options(results["claim_options"], sizes)
    check_fairness(results["fairness"], sizes)
    check_tenant_fairness(results["tenant_fairness"], sizes)
    check_tenant_claim(results["tenant_claim"], sizes)
    check_health(results["health"], sizes)
    check_enqueue(results["enqueue"], sizes)
    check_admission(results["admission"], sizes)
    check_doorbells(results["doorbells"], sizes)
    check_schedules(results["schedules"], sizes)
    check_shares(results["shares"], sizes)
    check_cost(results["cost"], sizes)
    check_caps(results["caps"], sizes)
    check_dashboard(results["dashboard"])


@pytest.mark.timeout(SMOKE_TIMEOUT_S + 10)
def test_fair_drains_alone_report_each_drain_and_the_ratios(admin_dsn: str) -> None:
    # The drains alone (bench/fair_drains.py), as issue 52's baseline was measured: fairqueue
    # plain and over two counts of groups, pgqueuer beside them, medians and ratios at the end.
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.fair_drains", "--smoke", "--dsn", admin_dsn),
            *("--groups", "10", "50", "--quanta", "1", "4", "--peer-workers", "1"),
            *("--workers", "2"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    fair = [f"over {g} groups, quantum {q}" for g in (10, 50) for q in (1, 4)]
    labels = [line.split(":")[0] for line in lines[:6]]
    assert labels == ["fairqueue plain x2", *(f"fairqueue {f} x2" for f in fair), "pgqueuer x1"]
    assert all("(1 runs)" in line for line in lines[:6])
    assert lines[6].startswith("fairqueue plain / pgqueuer's best: ")
    assert [line.split(":")[0] for line in lines[7:]] == fair
    assert len(lines) == 11


def test_batch_cost_splits_each_case_and_counts_the_rows_a_batch_writes(admin_dsn: str) -> None:
    # bench/batch_cost.py on the test's server (no pg_stat_statements there: functions and
    # tables only). A batch of 10 over 20 groups serves 10 standings; at a quantum of 4, over 20
    # groups of 12, the 3 groups whose runs (4, 4 and 2) fill it; 5 groups give 2 each.
    done = subprocess.run(
        [
            *(sys.executable, "-m", "bench.batch_cost", "--dsn", admin_dsn, "--batch", "10"),
            *("--batches", "3", "--rounds", "2", "--case", "20:3", "--case", "20:12:4"),
            *("--case", "5:12"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    cases = dict(section.split(": ", 1) for section in out.split("## ")[1:])
    assert list(cases) == [
        "20 groups x 3, quantum 1",
        "20 groups x 12, quantum 4",
        "5 groups x 12, quantum 1",
    ]
    assert all(text.startswith("2 rounds of 3 batches") for text in cases.values())
    served = ["0.0, 10.0", "0.0, 3.0", "0.0, 5.0"]
    for text, standings in zip(cases.values(), served, strict=True):
        assert f"    fairqueue.served: {standings}" in text
    for part in cases.values():
        assert "    fairqueue.jobs: 0.0, 10.0 (0.0), 10.0" in part
        assert "fairqueue.take_claimed: " in part
        assert "fairqueue.jobs_served_update: " in part


def check_doorbells(found: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    assert [f["system"] for f in found] == ["fairqueue", "pgqueuer"]
    for f in found:
        assert (f["paced_jobs"], f["burst_jobs"]) == (
            sizes["doorbell_jobs"],
            sizes["doorbell_burst"],
        )
        assert 0 < f["p50_ms"] <= f["p95_ms"] <= f["p99_ms"] <= f["max_ms"]
        assert f["burst_last_start_ms"] > 0 and f["burst_per_s"] > 0


def check_chart(path: Path) -> None:
    png = path.read_bytes()
    assert png.startswith(PNG_SIGNATURE)
    assert len(png) > 10_000  # four panels drawn, not an empty canvas


def check_machine(found: dict[str, Any]) -> None:
    assert found["nproc"] > 0
    assert found["memory_gib"] > 0
    for key in ("postgres", "python", "date"):
        assert found[key], key
    assert set(found["packages"]) >= {"psycopg", *PEERS}


def check_targets(targets: list[dict[str, Any]]) -> None:
    goals = " ".join(t["goal"] for t in targets)
    words = ("pgqueuer", "procrastinate", "bare loop", "many groups", "claim p99", "Jain")
    for word in (*words, "enqueue in batches", "admission (POST /jobs, direct)", "doorbell"):
        assert word in goals
    for target in targets:
        assert isinstance(target["met"], bool)
        assert target["ratio"] > 0, target["goal"]


def check_throughput(rows: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    seen = {(r["loop"], r["invocations"]) for r in rows}
    loops = (*OURS, "bare", "bare_jobs")
    assert seen == {(loop, n) for loop in loops for n in sizes["invocations"]}
    assert {n for _, n in seen} >= {1, 2}
    for row in rows:
        assert row["done"] == row["jobs"] == sizes["throughput_jobs"]
        assert row["claimed"] == row["done"]
        for key in ("seconds", "claimed_per_s", "completed_per_s", "ratio_to_bare"):
            assert row[key] > 0, (row["loop"], key)
        if row["loop"] in OURS:
            assert 0 < row["completion_share"] <= 1


def check_drain(
    rows: list[dict[str, Any]], peer_drains: list[dict[str, Any]], sizes: dict[str, Any]
) -> None:
    assert [r["workers"] for r in rows] == sizes["invocations"]
    for row in rows:
        assert set(row["jobs_per_s"]) == set(SYSTEMS)
        assert all(rate > 0 for rate in row["jobs_per_s"].values()), row
        for ours in OURS:
            assert set(row[f"{ours}_over"]) == set(SYSTEMS) - set(OURS)
            assert all(r > 0 for r in row[f"{ours}_over"].values()), row
    seen = {(d["peer"], d["workers"]) for d in peer_drains}
    assert seen == {(peer, n) for peer in PEERS for n in sizes["invocations"]}
    for drain in peer_drains:
        assert drain["done"] == drain["jobs"] == sizes["throughput_jobs"]
        assert drain["seconds"] > 0


def check_latency(cases: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    grid = [(p, h) for p in sizes["pendings"] for h in sizes["histories"]]
    expired = (sizes["pendings"][0], sizes["expired_history"])
    assert [(c["pending"], c["history"]) for c in cases] == [*grid, expired]
    for case in cases:
        assert case["samples"] == sizes["samples"]
        assert case["served_rows"] > 0
        assert case["served_drift"] == 0  # the counter agrees with a recount of the jobs
        # Each job a claim takes is found through an index of jobs: its reads count at least
        # those entries (they read 0 while only the table's own fetches were counted).
        assert case["plan"]["jobs_rows_read"] >= case["batch"], case["plan"]
        for key in ("p50_ms", "p99_ms", "p99_ratio_to_base_history"):
            assert case[key] > 0, (case["pending"], case["history"], key)
    assert cases[-1]["expired_rows"] == sizes["expired_history"]
    assert cases[-1]["first_claim_ms"] > 0


def check_claim_scale(cases: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    assert [c["groups"] for c in cases] == sizes["scale_groups"]
    for case in cases:
        assert case["pending"] == 3 * case["groups"]
        assert case["tenants"] * 5 == case["groups"]
        assert case["samples"] == sizes["scale_samples"]
        for key in ("p50_ms", "p99_ms", "cold_ms", "p99_ratio_to_fewest_groups"):
            assert case[key] > 0, (case["groups"], key)


def check_claim_options(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    # Each option at the fewest and the most groups, every claim a full batch but under caps
    # (claim_scale's timed_claim checks each), and each option's growth between them.
    groups = [min(sizes["scale_groups"]), max(sizes["scale_groups"])]
    options = [
        "quantum 4",
        "shares, weights 1:2:3",
        "fair_by cost, costs 1-100",
        "caps 2/5/none",
    ]
    assert [(c["groups"], c["option"]) for c in found["cases"]] == [
        (g, o) for g in groups for o in options
    ]
    for case in found["cases"]:
        assert case["samples"] == sizes["scale_samples"]
        assert 0 < case["p50_ms"] <= case["p99_ms"]
    assert set(found["p99_growth"]) == set(options)


def check_fairness(found: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    assert [f["system"] for f in found] == ["fairqueue", *PEERS]
    for result in found:
        assert result["jobs"] == sizes["fairness_jobs"]
        assert result["scored_windows"] > 0
        scored = [j for j in result["jain"] if j is not None]
        assert all(0 < j <= 1 for j in scored), result["system"]
        assert 0 < result["longest_wait"] < result["jobs"]
    # The point of the workload: the same skewed arrivals, first in first out, are served
    # less evenly than by the fair claim.
    ours = found[0]["jain_mean"]
    assert all(ours > f["jain_mean"] for f in found[1:])


def check_tenant_fairness(found: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    systems = [f["system"] for f in found]
    assert systems == ["fairqueue_tenant", "fairqueue_group", *PEERS]
    for result in found:
        assert result["jobs"] == sizes["tenant_fair_jobs"]
        assert result["scored_windows"] > 0
        assert all(0 < j <= 1 for j in result["jain"] if j is not None), result["system"]
        assert 0 < result["small_wait"] < result["jobs"]
    # The point of the workload: the tenant that splits its backlog over many groups wins more
    # than its share by group, and no more than it by tenant.
    by_system = {f["system"]: f for f in found}
    assert by_system["fairqueue_tenant"]["jain_mean"] > by_system["fairqueue_group"]["jain_mean"]
    assert (
        by_system["fairqueue_tenant"]["gaming_first_window"]
        < by_system["fairqueue_group"]["gaming_first_window"]
    )


def check_tenant_claim(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    cases = found["cases"]
    assert [c["fair_share"] for c in cases] == ["group", "tenant"]
    for case in cases:
        assert case["groups"] == sizes["tenant_claim_groups"]
        assert case["tenants"] == sizes["tenant_claim_tenants"]
        assert case["samples"] == sizes["tenant_claim_samples"]
        assert 0 < case["p50_ms"] <= case["p99_ms"]
    assert found["p99_tenant_over_group"] > 0


def check_health(rows: list[dict[str, Any]], sizes: dict[str, Any]) -> None:
    systems = {r["system"] for r in rows}
    assert systems == {"fairqueue", *PEERS}
    for system in systems:
        jobs_table = next(r for r in rows if r["system"] == system)
        assert jobs_table["churned"] == sizes["churn_jobs"]
        assert jobs_table["inserts"] >= sizes["churn_jobs"]
        assert jobs_table["updates"] >= sizes["churn_jobs"], system  # each job was claimed
    for row in rows:
        # A peer that deletes its finished jobs can end with an empty table that vacuum has
        # truncated to nothing; its indexes keep at least their metapage.
        assert row["table_bytes"] >= 0, row["table"]
        assert row["index_bytes"] > 0, row["table"]
        assert row["total_bytes"] >= row["table_bytes"] + row["index_bytes"]


def check_enqueue(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    assert (found["jobs"], found["batch"]) == (sizes["enqueue_jobs"], sizes["enqueue_batch"])
    ways = [r["way"] for r in found["rows"]]
    assert ways == [
        "fairqueue_each",
        "fairqueue_one_transaction",
        "fairqueue_many",
        "pgqueuer_each",
        "pgqueuer_batch",
        "procrastinate_batch",
    ]
    for row in found["rows"]:
        assert row["jobs_per_s"] > 0 and row["seconds"] > 0, row["way"]
        assert row["ratio_to_pgqueuer_batch"] > 0, row["way"]
        assert len(row["jobs_per_s_all_runs"]) == sizes["repeats"]
    per_call = {r["way"]: r["per_call"] for r in found["rows"]}
    assert per_call["fairqueue_many"] == per_call["pgqueuer_batch"] == sizes["enqueue_batch"]
    assert found["ratio_batch_to_pgqueuer_batch"] > 0


def check_schedules(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    # One sweep at each count of schedules: every due schedule made its one job.
    counts = [r["schedules"] for r in found["medians"]]
    assert counts == sorted(sizes["schedule_counts"])
    for run in found["runs"]:
        assert run["made"] == run["due"] == sizes["schedule_due"]
        assert run["seconds"] > 0
    assert found["growth"] > 0


def check_shares(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    # Every way drained both plans' backlogs; one pipeline under shares serves every round's
    # window exactly 3:1 (the order itself), and the light plan runs on alone at some rate.
    ways = {(r["order"], r["workers"]) for r in found["runs"]}
    workers = sizes["shares_workers"]
    assert ways == {("shares", 1), ("shares", workers), ("priority", workers)}
    for run in found["runs"]:
        assert run["jobs"] == 2 * sizes["shares_jobs_per_plan"]
        if run["order"] == "shares":
            assert run["windows"] > 0
    assert found["figures"]["ratio_error"] == 0
    assert found["figures"]["jain_min"] == 1
    assert found["figures"]["dry_per_s"] > 0


def check_cost(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    # Every run drained both tenants' backlogs; one pipeline under fair_by="cost" serves each
    # window's cost about 1:1 (a window's edge cuts at most a batch), where by jobs it would
    # serve 100:1.
    assert len(found["runs"]) == sizes["cost_repeats"]
    for run in found["runs"]:
        assert run["jobs"] > sizes["cost_cheap_jobs"]
        assert run["windows"] > 0
    assert found["figures"]["ratio_error"] < 0.5


def check_caps(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    # With the cap and without, every other tenant's job done; with it the capped tenant never
    # ran more than its cap.
    assert sorted(str(r["cap"]) for r in found["runs"]) == ["4", "None"]
    for run in found["runs"]:
        assert run["others"] == sizes["caps_jobs"]
        assert run["seconds"] > 0
    assert 0 < found["figures"]["most_running"] <= 4
    assert found["figures"]["others_ratio"] > 0


def check_admission(found: dict[str, Any], sizes: dict[str, Any]) -> None:
    assert found["clients"] == sizes["admission_clients"]
    assert found["fleet_clients"] == sizes["admission_fleet_clients"]
    # The pooled rows need PgBouncer, the fleets a private cluster (pgserver); where they
    # cannot run they are skipped with the reason.
    ways = [w for w in ADMISSION_WAYS if w not in found["skipped"]]
    assert all(why for why in found["skipped"].values())
    seen = [(r["way"], r["clients"]) for r in found["rows"]]
    levels = {
        way: sizes["admission_fleet_clients" if way.startswith("fleet") else "admission_clients"]
        for way in ways
    }
    assert seen == [(way, n) for way in ways for n in levels[way]]
    for row in found["rows"]:
        assert row["errors"] == 0, row["error_example"]
        assert row["admitted"] > 0 and row["seconds"] > 0, row
        assert row["admissions_per_s"] > 0 and row["ratio_to_one_client"] > 0, row
        assert 0 < row["p50_ms"] <= row["p99_ms"], row
        held = row["api_processes"] * row["api_pool_size"]
        assert 0 < row["server_connections"] <= held, row
        if row["way"].startswith("fleet"):
            assert row["api_processes"] == row["clients"] and row["api_pool_size"] == 1, row
        if row["way"] in ("pooled", "fleet_pooled"):
            assert row["server_connections"] <= found["pooler_server_connections"]
            assert row["ratio_pooled_to_direct"] > 0, row
    assert [p["way"] for p in found["pipelines"]] == [w for w in ways if w in ("direct", "pooled")]
    for run in found["pipelines"]:
        assert run["pipelines"] == sizes["pooled_pipelines"]
        assert run["jobs"] == sizes["throughput_jobs"]
        assert run["jobs_per_s"] > 0 and run["server_connections"] > 0, run
        assert run["ratio_to_direct"] > 0, run


def check_dashboard(pages: list[dict[str, Any]]) -> None:
    # Every page fetched, each with a time and a body.
    assert [p["path"] for p in pages] == [
        "/",
        "/fairness",
        "/jobs",
        "/failed",
        "/groups",
        "/quotas",
        "/runs",
        "/schedules",
        "/jobs/{id}",
        "/jobs/{id} (waiting)",
    ]
    assert all(p["median_s"] > 0 and p["bytes"] > 0 for p in pages)
