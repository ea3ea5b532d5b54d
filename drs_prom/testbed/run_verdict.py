"""The verdict of one closed-loop run: what the apiserver, the twin kubelet, the run's Prometheus and its
rebalancer say happened, as one row of the testbed's report (drs_prom.testbed.testbed_report summarises the rows).

Pod times are the apiserver's (the twin kubelet's start and finish annotations), node metrics the run's stored
series (drs_prom.testbed.judge), a replaced pod counted once from its first creation (drs_prom.testbed.replacements).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from drs_prom.config import ObjectiveSettings
from drs_prom.sim.env import ESTIMATED, TOLD
from drs_prom.sim.workload import Workload
from drs_prom.testbed import disruption_budgets, judge, violations
from drs_prom.testbed.driver import RUN_LABEL, checked_annotations, pinned_names
from drs_prom.testbed.rebalancers import rebalancing
from drs_prom.testbed.run_context import RunContext
from drs_prom.testbed.stored_usage import run_pod_table


def judge_run(
    scheduler: str,
    seed: int,
    ctx: RunContext,
    wl: Workload,
    end: float,
    prom_rss: int,
    wall: float,
    fault_result: dict[str, Any],
) -> dict[str, Any]:
    """The verdict of one run (closed_loop.Testbed.run_one): what the apiserver, the twin kubelet, the run's
    Prometheus and its rebalancer say happened, as the JSON row of the report."""
    tb = ctx.testbed
    cfg = tb.config
    pods = judge.list_pods(tb.api, ctx.namespace)
    names_created = set(ctx.driver.result.created)
    annotated = checked_annotations(pods, names_created, cfg.told_usage, ctx.namespace)
    claims, pvs = judge.list_volumes(tb.api, ctx.namespace, f"{RUN_LABEL}={ctx.namespace}")
    broken = violations.count(pods, judge.list_nodes(tb.api, tb.nodes.names), claims, pvs)
    rep = ctx.replacements.result if ctx.replacements is not None else None
    lineage = rep.lineage if rep is not None else {}
    work = ctx.owners.work(wl)
    work = {**work, **{new: work[root] for new, root in lineage.items()}}
    times = judge.PodTimes.from_api(pods, work)
    st = ctx.kubelet.stats
    times = judge.with_deleted_completions(
        times, ctx.driver.result.created, st.started, st.finished, work, st.bound_node
    )
    # a replaced pod counts once, from its first creation to its last replacement's end, over its own work
    times = judge.continued(times, lineage, ctx.driver.result.created, st.started)
    times = times.without(pinned_names(wl, ctx.owners))  # bound at creation: not the scheduler's, as in bench
    summary = times.summary(cfg.speed)
    finished = [p.finished for p in times.pods if p.finished]
    last = max(finished) if finished else end
    window = f"{max(1, round(4 * cfg.scrape_seconds * 1000))}ms"
    series = judge.fetch_node_series(ctx.prom, tb.nodes.names, ctx.started, min(end, last), cfg.scrape_seconds, window)
    nodes = judge.node_metrics(series, tb.nodes, tb.scenario.norm, ObjectiveSettings().hot_fraction)
    counted = judge.scheduler_counters(ctx.prom, end, end - ctx.started + 5, bool(ctx.sched.metrics_urls))
    in_api = {p["metadata"]["name"] for p in pods}
    replaced = {e.pod for e in rep.evictions if e.replacement is not None} if rep is not None else set()
    lost = sorted(
        (names_created - in_api - replaced - set(st.finished))
        | {p.name for p in times.pods if p.name in names_created and p.phase not in ("Succeeded", "Failed")}
    )
    lost += ctx.driver.result.errors
    short = disruption_budgets.broken(
        ctx.budgets, ctx.owners, lineage, rep.evictions if rep is not None else [], st.started, st.finished
    )
    stored = run_pod_table(ctx.prom.url, ctx.namespace, wl, ctx.owners, ctx.started, end)  # usage_accuracy.py
    return {
        "scheduler": scheduler,
        "seed": seed,
        "namespace": ctx.namespace,
        "information": TOLD if cfg.told_usage else ESTIMATED,
        "pod_usage": stored,
        "usage_annotated": annotated,  # pods the driver created that carried a usage annotation (told: all)
        "pods": wl.n_scheduled,  # the pods a scheduler places: the pinned background load aside
        "imbalance": nodes["imbalance"],
        "utilisation": nodes["utilisation"],
        "hot_node_time": nodes["hot_node_time"],
        "hot_node_time_bench": nodes["hot_node_time_bench"],
        "completion_mean": summary["completion_mean"],
        "completion_p95": summary["completion_p95"],
        "slowdown_mean": summary["slowdown_mean"],
        "slowdown_p95": summary["slowdown_p95"],
        "makespan": summary["makespan"],
        "start_delay_mean": summary["start_delay_mean"],
        "start_delay_p95": summary["start_delay_p95"],
        "device_pods": summary["device_pods"],
        "device_start_delay_mean": summary["device_start_delay_mean"],
        "device_start_delay_p95": summary["device_start_delay_p95"],
        "bound": summary["bound"],
        "completed": summary["completed"],
        "lost": len(lost),
        "lost_pods": lost[:20],
        "double_bound": len(st.double_bound),
        "infeasible": len(st.infeasible),
        "violations": broken.total,
        "violations_by_kind": broken.by_kind(),
        "extended_misplaced": len(judge.extended_misplaced(pods, tb.nodes)),
        **counted,
        "node_coverage_min": min(nodes["node_coverage"].values()) if nodes["node_coverage"] else 0.0,
        "nodes_with_metrics": sum(v > 0 for v in nodes["node_coverage"].values()),
        "n_nodes": len(tb.nodes),
        "steps": nodes["steps"],
        "wall_seconds": wall,
        "scheduler_peak_rss_bytes": ctx.sched.peak_rss,
        "prometheus_peak_rss_bytes": prom_rss,
        "driver_max_lag_seconds": ctx.driver.result.max_lag_seconds,
        "kubelet_write_retries": st.write_retries,
        "kubelet_status_lag_p95_seconds": float(np.percentile(st.status_lag, 95)) if st.status_lag else math.nan,
        "watch_reconnects": ctx.kubelet.watch.reconnects,
        "faults": fault_result,
        **rebalancing(ctx.rebalancer, st.evicted, rep, len(tb.nodes), (last - ctx.started) * cfg.speed),
        "disruption_budgets": len(ctx.budgets),
        "pdb_violations": len(short),
        "pdb_violated_by": [v.pod for v in short][:20],
        "series": nodes["series"],
    }
