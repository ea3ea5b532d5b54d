"""The testbed's report: per-scheduler means over seeds, the agreement with ``bench``, table, JSON, PNG.

``bench_agreement`` runs the in-process benchmark on the same scenario, pods and seeds for the
policies that have a simulator twin (the real kube-scheduler's is ``kube-default``; drs-prom's
heuristics and ``drs`` are themselves) and states, per metric, the closed loop's % difference
to bench (the simulator's fidelity), and whether both rank the schedulers the same by imbalance;
bench is told of the pods' usage what the testbed's schedulers were (``information``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.outcomes.objectives import TERMS
from drs_prom.outcomes.paired_stats import relative_interval
from drs_prom.sim.bench_results import json_default
from drs_prom.sim.env import ESTIMATED, TOLD
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.table import format_columns
from drs_prom.testbed.schedulers import DESCHEDULER, KUBE, KUBE_EXTENDER, KUBE_MOST_ALLOCATED, split_rebalancer

METRICS: tuple[tuple[str, str, str], ...] = (
    # key, column title (in full: the table wraps it), which direction is better
    ("imbalance", "DRS imbalance", "lower"),
    ("utilisation", "utilisation", "higher"),
    ("hot_node_time", "hot-node time", "lower"),
    ("completion_p95", "p95 completion time (s)", "lower"),
    ("slowdown_p95", "p95 pod slowdown", "lower"),
    ("start_delay_p95", "p95 start delay (s)", "lower"),
)
COUNT_TITLES = (
    "pods bound",
    "pods completed",
    "pods lost",
    "pods bound twice",
    "pods infeasible",
    "constraint violations",
    "evictions",
    "PDB violations",
)
"""Column titles of COUNTS, in order."""
EXTRA = (
    "completion_mean",
    "slowdown_mean",
    "start_delay_mean",
    "makespan",
    "device_start_delay_mean",
    "device_start_delay_p95",
    "evictions_per_node_hour",
    "hot_node_time_bench",
)
"""Means over seeds kept in the JSON beside METRICS; the device pods' start delays are NaN where no pod asks for a
device (a CPU scenario)."""
COUNTS = ("bound", "completed", "lost", "double_bound", "infeasible", "violations", "evictions", "pdb_violations")
"""Summed over seeds; ``violations`` are testbed.violations' hard-constraint breaches (anti-affinity pairs, spread
skew, extended resources over capacity, host port pairs), counted from the apiserver after each run;
``pdb_violations`` the evictions that left a Deployment short of its PodDisruptionBudget
(testbed.disruption_budgets)."""
AGREEMENT_METRICS = ("imbalance", "utilisation", "completion_p95")
REFERENCE = KUBE
JUDGED = ("imbalance", "slowdown_p95")
"""The closed-loop bar's metrics, each judged against the real kube-scheduler paired by seed (``versus_reference``)."""


def information_text(information: str) -> str:
    """How a testbed report says what the schedulers were told of the pods' usage (``information``)."""
    if information == TOLD:
        return "pod usage TOLD: every pod annotated with drs.io/demand (--told-usage)"
    return "pod usage not told: no pod carries a usage annotation; schedulers estimate it from Prometheus"


def bench_twin(scheduler: str) -> str | None:
    """The simulator policy that stands for ``scheduler`` in bench (None: no twin; the real descheduler has none)."""
    base, rebalancer = split_rebalancer(scheduler)
    if rebalancer == DESCHEDULER:
        return None
    if rebalancer is not None:
        twin = bench_twin(base)
        return None if twin is None else f"{twin}+{rebalancer}"
    if scheduler == KUBE:
        return "kube-default"
    if scheduler == KUBE_MOST_ALLOCATED:
        return "most-allocated-gpu"
    if scheduler == KUBE_EXTENDER:
        return None
    return scheduler


def _mean(runs: Sequence[dict[str, Any]], key: str) -> float:
    vals = [float(r[key]) for r in runs if r.get(key) is not None and not math.isnan(float(r[key]))]
    return float(np.mean(vals)) if vals else math.nan


def summarise(runs: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """scheduler -> {mean of each metric, sums of the counts, fallbacks by reason summed, runs}."""
    out: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(r["scheduler"] for r in runs):
        mine = [r for r in runs if r["scheduler"] == name]
        fb: dict[str, float] = {}
        dec: dict[str, float] = {}
        src: dict[str, float] = {}
        kinds: dict[str, int] = {}
        for r in mine:
            for source, n in r.get("usage_estimates", {}).items():
                src[source] = src.get(source, 0.0) + n
            for kind, n in r.get("violations_by_kind", {}).items():
                kinds[kind] = kinds.get(kind, 0) + int(n)
            for reason, n in r.get("fallback_decisions", {}).items():
                fb[reason] = fb.get(reason, 0.0) + n
            for policy, n in r.get("decisions_by_policy", {}).items():
                dec[policy] = dec.get(policy, 0.0) + n
        out[name] = {
            **{k: _mean(mine, k) for k, _, _ in METRICS},
            **{k: _mean(mine, k) for k in EXTRA},
            **{k: int(sum(int(r.get(k, 0)) for r in mine)) for k in COUNTS},  # a run without a rebalancer evicts none
            "fallback_decisions": fb,
            "decisions_by_policy": dec,
            "usage_estimates": src,
            "violations_by_kind": kinds,
            "wall_seconds": _mean(mine, "wall_seconds"),
            "scheduler_peak_rss_bytes": max(int(r["scheduler_peak_rss_bytes"]) for r in mine),
            "prometheus_peak_rss_bytes": max(int(r["prometheus_peak_rss_bytes"]) for r in mine),
            "runs": [{k: v for k, v in r.items() if k != "series"} for r in mine],
        }
    return out


def _by_seed(runs: Sequence[dict[str, Any]], key: str) -> dict[int, float]:
    return {int(r["seed"]): float(r[key]) for r in runs if r.get(key) is not None and not math.isnan(float(r[key]))}


def versus_reference(per: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, float | int]]]:
    """scheduler -> metric -> the paired 95 % interval of (scheduler - kube-scheduler) / mean(kube-scheduler).

    The seeds are the same workloads, so the per-seed differences are paired, as ``bench`` judges composites
    (drs_prom.outcomes.paired_stats.relative_interval). A ratio of means over three seeds hides how far it can move:
    the real kube-scheduler itself lands a few per cent apart on the same seed from run to run, and the t
    quantile at two degrees of freedom is 4.3. The interval says which comparisons the run can decide.
    """
    ref = per.get(REFERENCE)
    if ref is None:
        return {}
    return {
        name: {k: relative_interval(_by_seed(row["runs"], k), _by_seed(ref["runs"], k)).to_json() for k in JUDGED}
        for name, row in per.items()
        if name != REFERENCE
    }


SATURATED_LAG_SECONDS = 1.0
"""Driver lag (wall seconds behind the workload's schedule) above which a run measured the host as much as the
scheduler. On a host that keeps up the driver runs a few hundredths of a second late; at --speed 10 one wall second
late is ten simulated seconds, longer than most start delays the report compares."""


def saturated_runs(per: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs whose workload driver fell more than SATURATED_LAG_SECONDS behind its schedule: the host could not
    keep up, so their start delays and slowdowns include the host's own queueing (scheduler, seed, lag)."""
    return [
        {"scheduler": name, "seed": int(r["seed"]), "driver_lag_seconds": float(r["driver_max_lag_seconds"])}
        for name, row in per.items()
        for r in row.get("runs", [])
        if float(r.get("driver_max_lag_seconds") or 0.0) > SATURATED_LAG_SECONDS
    ]


def bench_agreement(
    scenario: Scenario, pods: int | None, seeds: Sequence[int], schedulers: Sequence[str], per: dict[str, Any],
    model_path: str | None, information: str = ESTIMATED,
) -> dict[str, Any]:  # fmt: skip
    """bench on the same scenario/pods/seeds for the schedulers' twins, and the % differences.

    A trace scenario is replayed per sampling seed, as ``bench --trace`` does (its pod count is the trace
    section's ``max_pods``). Its policies are told the pods' usage as the testbed's schedulers were (``information``,
    sim.env's words)."""
    from drs_prom.sim.bench import model_builder, run_bench
    from drs_prom.sim.trace_bench import run_trace_bench

    twins = {s: bench_twin(s) for s in schedulers}
    policies = list(dict.fromkeys(t for t in twins.values() if t))
    builder = model_builder(model_path)
    if scenario.trace is not None:
        report = run_trace_bench(scenario, list(seeds), policies, builder, progress=False, information=information)
    else:
        sc = scenario.truncated(pods) if pods else scenario
        report = run_bench(sc, list(seeds), policies, builder, progress=False, information=information)
    rows: dict[str, Any] = {}
    for s, twin in twins.items():
        row = report.row(twin) if twin else None
        if row is None or not row.runs or s not in per:
            continue
        bench_means = {k: row.mean(k) for k in AGREEMENT_METRICS}
        rows[s] = {
            "bench_policy": twin,
            "bench": bench_means,
            "testbed": {k: per[s][k] for k in AGREEMENT_METRICS},
            "difference_percent": {
                k: (per[s][k] - bench_means[k]) / bench_means[k] * 100 if bench_means[k] else math.nan
                for k in AGREEMENT_METRICS
            },
        }
    ranked = list(rows)
    testbed_rank = sorted(ranked, key=lambda s: rows[s]["testbed"]["imbalance"])
    bench_rank = sorted(ranked, key=lambda s: rows[s]["bench"]["imbalance"])
    out: dict[str, Any] = {
        "policies": rows,
        "ranking_by_imbalance": {"testbed": testbed_rank, "bench": bench_rank},
        "ranking_equal": testbed_rank == bench_rank,
    }
    if KUBE in rows:
        real, sim = rows[KUBE]["testbed"], rows[KUBE]["bench"]
        out["kube_default_vs_kube_scheduler_percent"] = {  # bench's kube-default relative to the real kube-scheduler
            k: (sim[k] - real[k]) / real[k] * 100 if real[k] else math.nan for k in AGREEMENT_METRICS
        }
    return out


def _fmt(v: float, key: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f}" if key in ("imbalance", "utilisation", "hot_node_time", "slowdown_p95") else f"{v:.1f}"


def _interval(iv: dict[str, float]) -> str:
    """``+x.x % [low, high]``; the mean alone where one seed gives no interval."""
    if math.isnan(iv["low"]) or math.isnan(iv["high"]):
        return f"{100 * iv['mean']:+.1f} % (no interval)"
    return f"{100 * iv['mean']:+.1f} % [{100 * iv['low']:+.1f}, {100 * iv['high']:+.1f}]"


def format_table(report: dict[str, Any]) -> str:
    per = report["schedulers"]
    ref = per.get(REFERENCE)
    head = ["scheduler", *(t for _, t, _ in METRICS), *COUNT_TITLES]
    rows = []
    for name, row in per.items():
        cells = [name]
        for k, _, _ in METRICS:
            cell = _fmt(row[k], k)
            if ref is not None and name != REFERENCE and ref[k] and not math.isnan(ref[k]) and not math.isnan(row[k]):
                cell += f" ({row[k] / ref[k]:.2f}x)"
            cells.append(cell)
        cells += [str(row[k]) for k in COUNTS]
        rows.append(cells)
    title = (
        f"testbed {report['scenario']}: {report['n_nodes']} nodes, {report['pods']} pods x {len(report['seeds'])} "
        f"seeds, speed {report['speed']:g}x, scrape {report['scrape_seconds']:g}s (mean over seeds; "
        f"(x) = ratio to the real {REFERENCE}; judged by PromQL + apiserver pod times)"
    )
    out = [title]
    if report.get("information"):
        out.append(information_text(report["information"]))
    out += format_columns(head, rows)
    out.append(TERMS.split(";")[0] + "; start delay = pod creation to running on a node")
    versus = report.get("versus_reference")
    if versus:
        titles = {k: t for k, t, _ in METRICS}
        out.append(f"paired by seed against the real {REFERENCE} (relative difference, 95 % interval):")
        for name, row in versus.items():
            parts = ", ".join(f"{titles[k]} {_interval(iv)}" for k, iv in row.items())
            seeds = next(iter(row.values()))["seeds"]
            out.append(f"  {name}: {parts} ({seeds} seed{'' if seeds == 1 else 's'})")
    saturated = report.get("host_saturated")
    if saturated:
        total = sum(len(row.get("runs", [])) for row in per.values())
        worst = max(r["driver_lag_seconds"] for r in saturated)
        out.append(
            f"host saturated: the workload driver fell more than {SATURATED_LAG_SECONDS:g} s behind its schedule in "
            f"{len(saturated)} of {total} runs (up to {worst:.1f} s); their start delays and slowdowns include the "
            "host's own queueing"
        )
    agr = report.get("bench_agreement")
    if agr:
        out.append("simulator fidelity (closed loop vs bench, same policy/seeds; % difference):")
        for name, row in agr["policies"].items():
            diffs = ", ".join(f"{k} {v:+.1f}%" for k, v in row["difference_percent"].items())
            out.append(f"  {name} (bench {row['bench_policy']}): {diffs}")
        out.append(
            f"  ranking by imbalance equal: {agr['ranking_equal']} "
            f"(testbed {agr['ranking_by_imbalance']['testbed']}, bench {agr['ranking_by_imbalance']['bench']})"
        )
    for name, row in per.items():
        if row.get("violations"):
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(row.get("violations_by_kind", {}).items()) if v)
            out.append(f"{name} constraint violations by kind (apiserver): {kinds}")
    for name, row in per.items():
        if row.get("decisions_by_policy"):
            dec = ", ".join(f"{k}={v:.0f}" for k, v in sorted(row["decisions_by_policy"].items()))
            fb = ", ".join(f"{k}={v:.0f}" for k, v in sorted(row["fallback_decisions"].items())) or "none"
            out.append(f"{name} decisions by policy (PromQL): {dec}; fallbacks by reason: {fb}")
        if row.get("usage_estimates"):
            src = ", ".join(f"{k}={v:.0f}" for k, v in sorted(row["usage_estimates"].items()))
            out.append(f"{name} pod usage estimates by source (drs_usage_estimates_total): {src}")
    return "\n".join(out)


def write(
    report: dict[str, Any], out_dir: str | Path, series: dict[str, Any] | None = None
) -> tuple[Path, Path | None]:
    """DIR/testbed-S.json (temp file then rename) and, with ``series``, DIR/testbed-S.png."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"testbed-{report['scenario']}"
    path = out / f"{stem}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1, default=json_default))
    tmp.replace(path)
    png = None
    if series:
        png = out / f"{stem}.png"
        _plot(series, png, report["scenario"])
    return path, png


def _plot(series: dict[str, Any], path: Path, scenario: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from drs_prom.sim.bench_plots import policy_styles

    styles = policy_styles(list(series))
    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for name, s in series.items():
        a.plot(s["t"], s["imbalance"], label=name, **styles[name])
        b.plot(s["t"], s["utilisation"], **styles[name])
    a.set_ylabel("imbalance (PromQL)")
    b.set_ylabel("utilisation (PromQL)")
    b.set_xlabel("wall seconds since the first pod")
    a.set_title(f"testbed {scenario}: first seed")
    fig.tight_layout()
    fig.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False, handlelength=3)
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100, bbox_inches="tight")  # the canvas grows to the legend right of the panels
    plt.close(fig)
    tmp.replace(path)
