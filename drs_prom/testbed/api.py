"""The testbed's Python API (``drs-prom testbed`` is a thin wrapper): run every scheduler on every seed.

    report = run_testbed("drs-paper", seeds=[0], pods=20, speed=20,
                         schedulers=["kube-scheduler", "drs"], out_dir="out/testbed")

Each seed's workload is generated once and every scheduler faces the identical pods at the
identical (accelerated) arrival times, on one control plane with the same fake nodes. A
scenario with a ``trace:`` section (``drs-prom testbed --trace``) gets one control plane
per seed, with that seed's sampled nodes.

The schedulers are told nothing of the pods' usage (``information`` "estimated": they estimate it from what
Prometheus holds, the twin kubelets' cAdvisor series) unless ``told_usage`` annotates every pod with
``drs.io/demand`` ("told"); the report says which, and so does the bench run it is compared with.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from drs_prom.errors import ConfigError
from drs_prom.sim.env import ESTIMATED, TOLD
from drs_prom.sim.generator import resolve_scenario
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import Workload
from drs_prom.testbed import testbed_report as rep
from drs_prom.testbed.closed_loop import RunConfig, Testbed, workload_for
from drs_prom.testbed.process import handle_termination, live_processes, stop_all


def scale_scenario(scenario: Scenario, n_nodes: int) -> Scenario:
    """The scenario with ``n_nodes`` nodes: its node types' counts scaled in proportion (at least 1 each
    while room is left), the rest of it unchanged."""
    if n_nodes < 1:
        raise ConfigError("--nodes-scale must be at least 1")
    types = [t.model_dump() for t in scenario.nodes]
    total = sum(t["count"] for t in types)
    counts = [max(1, math.floor(t["count"] * n_nodes / total)) for t in types]
    while sum(counts) > n_nodes and max(counts) > 1:
        counts[counts.index(max(counts))] -= 1
    i = 0
    while sum(counts) < n_nodes:
        counts[i % len(counts)] += 1
        i += 1
    for t, c in zip(types, counts):
        t["count"] = c
    return scenario.with_changes(nodes=[t for t, c in zip(types, counts) if c > 0])


def cluster_stages(
    scenario: Scenario, seeds: Sequence[int], echo: Callable[[str], None]
) -> list[tuple[Scenario, list[int]]]:
    """The (scenario, seeds) each Testbed runs: one for a generated scenario, whose nodes are the same for every
    seed; one per seed for a replayed trace, since each sampling seed draws its own nodes (drs_prom.sim.trace_sample)."""
    if scenario.trace is None:
        return [(scenario, list(seeds))]
    from drs_prom.sim.trace_bench import describe
    from drs_prom.sim.trace_sample import materialise

    out = []
    for seed in seeds:
        concrete, stats = materialise(scenario, seed)
        echo(describe(seed, stats))
        out.append((concrete, [seed]))
    return out


MIN_SCRAPE_SECONDS = 0.5
# One Python process serves every simulated node's node_exporter page and its kubelet's cAdvisor page, sharing two
# cores with the control plane, Prometheus and the scheduler under test; measured on such a host (eval-poisson-1,
# 89 nodes): every 0.5 s the pages fell behind (95 % of drs-prom's decisions fell back on stale metrics, the driver
# 7 s late), every 1 s none did. About 10 ms of that process's time per node and scrape keeps it under half a core.
SCRAPE_SECONDS_PER_NODE = 0.01


def auto_scrape_seconds(n_nodes: int) -> float:
    """The testbed's scrape interval for ``n_nodes``: 0.5 s, longer in 0.5 s steps where one process could not
    serve every node's two pages that often (1 s at 89 nodes, 10 s at 1,000)."""
    need = SCRAPE_SECONDS_PER_NODE * n_nodes
    return max(MIN_SCRAPE_SECONDS, math.ceil(round(need / MIN_SCRAPE_SECONDS, 9)) * MIN_SCRAPE_SECONDS)


def default_model() -> str | None:
    from drs_prom.sim.bench import shipped_model

    return shipped_model()[0]


def placed_text(wl: Workload) -> str:
    """``N pods`` a scheduler places, and the pinned background pods apart (created bound to their node)."""
    placed = wl.n_scheduled
    pinned = len(wl) - placed
    return f"{placed} pods" + (f" (+{pinned} pinned background)" if pinned else "")


def run_testbed(
    scenario: str | Scenario,
    seeds: Sequence[int],
    pods: int | None,
    speed: float,
    schedulers: Sequence[str],
    out_dir: str | Path,
    *,
    nodes_scale: int | None = None,
    scrape_seconds: float | None = None,
    model_path: str | None = None,
    faults: bool = False,
    bench: bool = True,
    workdir: str | Path | None = None,
    kubeconfig: str | None = None,
    told_usage: bool = False,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run, judge, compare with bench, print the table and write DIR/testbed-S.json (+ PNG).

    ``faults``: instead of the comparison, the fault script (drs-prom in 2 replicas, faults.py).
    ``kubeconfig``: an existing cluster instead of the testbed's own control plane (Testbed).
    ``told_usage``: every pod annotated with ``drs.io/demand`` (the told regime); by default nothing on a pod says
    its usage, and a run fails if a pod carried a usage annotation all the same (driver.UsageLeak)."""
    import tempfile

    sc = resolve_scenario(scenario) if isinstance(scenario, str) else scenario  # as bench: eval clusters by name
    if nodes_scale:
        if sc.trace is not None:
            raise ConfigError("--nodes-scale scales a scenario's node types; a trace samples its own (--trace-nodes)")
        sc = scale_scenario(sc, nodes_scale)
    if speed <= 0:
        raise ConfigError("--speed must be positive")
    if faults and sc.trace is not None:
        raise ConfigError("--faults runs its own generated workload; it does not replay a trace")
    if sc.trace is not None and pods:
        sc = sc.with_changes(trace=sc.trace.model_copy(update={"max_pods": pods}).model_dump())
        pods = None  # the replay keeps the first ``pods`` of each seed's window, as bench --trace does
    stages = cluster_stages(sc, seeds, echo)
    model = model_path or default_model()
    n_nodes = max(stage.n_nodes for stage, _ in stages)
    servable = auto_scrape_seconds(n_nodes)
    if scrape_seconds is None:
        scrape_seconds = servable
    elif scrape_seconds < servable:
        echo(
            f"warning: {n_nodes} simulated nodes' pages every {scrape_seconds:g}s may outrun the one process that "
            f"serves them; nodes will go stale and drs-prom fall back (metrics_stale). The default for this size: "
            f"--scrape {servable:g}."
        )
    cfg = RunConfig(
        speed=speed,
        scrape_seconds=scrape_seconds,
        exporter_mode="paths" if n_nodes > 200 else "ports",
        model_path=model,
        told_usage=told_usage,
    )
    information = TOLD if told_usage else ESTIMATED
    echo(rep.information_text(information))
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="drs-testbed-"))
    ok = False
    t0 = time.monotonic()
    runs: list[dict[str, Any]] = []
    fault_report: dict[str, Any] | None = None
    already_running = live_processes()  # not ours to stop (a caller's control plane)
    with handle_termination():
        try:
            for stage, stage_seeds in stages:
                stage_dir = base if len(stages) == 1 else base / f"seed-{stage_seeds[0]}"
                with Testbed(stage, stage_dir, cfg, echo, kubeconfig) as tb:
                    for seed in stage_seeds if not faults else ():  # --faults: the fault script alone
                        wl = workload_for(stage, seed, pods)
                        for name in schedulers:
                            echo(f"run {name} seed {seed}: {placed_text(wl)} on {stage.n_nodes} nodes at {speed:g}x")
                            r = tb.run_one(name, seed, wl)
                            runs.append(r)
                            echo(
                                f"  imbalance {r['imbalance']:.3f} util {r['utilisation']:.3f} ct p95 "
                                f"{r['completion_p95']:.1f}s (start delay p95 {r['start_delay_p95']:.1f}s) "
                                f"bound {r['bound']}/{r['pods']} done {r['completed']} lost {r['lost']} "
                                f"infeasible {r['infeasible']} ({r['wall_seconds']:.0f}s wall)"
                            )
                            if r["device_pods"]:
                                echo(
                                    f"  {r['device_pods']} pods ask for devices: start delay p95 "
                                    f"{r['device_start_delay_p95']:.1f}s, misplaced {r['extended_misplaced']}"
                                )
                    if faults:
                        from drs_prom.testbed.faults import run_faults

                        fault_report = run_faults(tb, seeds[0], pods, echo)
            ok = True
        finally:
            stop_all(keep=already_running)
            if ok and not workdir:
                shutil.rmtree(base, ignore_errors=True)
            elif not ok:
                echo(f"testbed failed or was interrupted; logs kept in {base}")
    per = rep.summarise(runs)
    pods_per_seed = [
        workload_for(stage, seed, pods).n_scheduled for stage, stage_seeds in stages for seed in stage_seeds
    ]
    report: dict[str, Any] = {
        "scenario": sc.name,
        "seeds": list(seeds),
        "pods": round(sum(pods_per_seed) / len(pods_per_seed)),
        "pods_per_seed": pods_per_seed,
        "n_nodes": n_nodes,
        "speed": speed,
        "scrape_seconds": scrape_seconds,
        "exporter_mode": cfg.exporter_mode,
        "model": model,
        "cluster": "kubeconfig" if kubeconfig else "own",
        "information": information,
        "wall_seconds": time.monotonic() - t0,
        "schedulers": per,
        "versus_reference": rep.versus_reference(per),
        "host_saturated": rep.saturated_runs(per),
    }
    if sc.trace is not None:
        report["trace"] = sc.trace.model_dump()
    if bench and runs:
        report["bench_agreement"] = rep.bench_agreement(sc, pods, seeds, list(per), per, model, information)
    if fault_report is not None:
        report["faults"] = fault_report
    if faults:
        json_path, _ = rep.write(report | {"scenario": f"{sc.name}-faults"}, out_dir)
        echo(f"{rep.information_text(information)}\nresults: {json_path}")
        return report
    series = {r["scheduler"]: r["series"] for r in runs if r["seed"] == seeds[0] and r["series"]["t"]}
    json_path, png = rep.write(report, out_dir, series)
    echo(rep.format_table(report))
    echo(f"results: {json_path}" + (f"\nplot: {png}" if png else ""))
    return report


__all__ = ["cluster_stages", "run_testbed", "scale_scenario"]
