"""The benchmark on a replayed trace: one sampling seed per benchmark seed, and a sweep of the usage model.

Every seed draws its own node sample and run-time/usage draws (drs_prom.sim.trace_sample), and
every policy replays that seed's identical pods, so per-seed differences stay paired; the
rows of all seeds are merged into one BenchReport that drs_prom.sim.suite summarises
(composite ranking, paired 95 % interval against the best heuristic).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.sim.bench import PolicyBuilder, default_builder, run_bench
from drs_prom.sim.bench_results import BenchReport, PolicyRow
from drs_prom.sim.env import ESTIMATED
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.suite import ScenarioSummary, summarise
from drs_prom.sim.trace_sample import ReplayStats, materialise


def run_trace_bench(
    scenario: Scenario,
    seeds: Sequence[int],
    policies: Sequence[str],
    builder: PolicyBuilder = default_builder,
    progress: bool = True,
    echo: Callable[[str], None] | None = None,
    information: str = ESTIMATED,
) -> BenchReport:
    """Every policy on every seed's replay of ``scenario.trace``; one merged report. ``information``: what the
    policies are told of each pod's usage (the trace names no owners, so an estimate is its requests' prior)."""
    if scenario.trace is None:
        raise ConfigError(f"scenario {scenario.name} has no trace: section")
    t0 = time.perf_counter()
    rows = {p: PolicyRow(p) for p in policies}
    nodes: list[int] = []
    pods: list[int] = []
    for seed in seeds:
        concrete, stats = materialise(scenario, seed)
        if echo is not None:
            echo(describe(seed, stats))
        part = run_bench(concrete, [seed], policies, builder, progress=progress, information=information)
        nodes.append(part.n_nodes)
        pods.append(part.pods)
        for row in part.rows:
            merged = rows[row.policy]
            if row.skipped:
                merged.skipped = row.skipped
                merged.runs.clear()
            elif not merged.skipped:
                merged.runs.extend(row.runs)
    return BenchReport(
        scenario.name,
        list(seeds),
        round(float(np.mean(nodes))),
        round(float(np.mean(pods))),
        list(rows.values()),
        wall_seconds=time.perf_counter() - t0,
        information=information,
    )


def describe(seed: int, stats: ReplayStats) -> str:
    """One line about what a seed's sampling kept and dropped."""
    return (
        f"seed {seed}: {stats.nodes} nodes, {stats.pods} pods ({stats.carried} carried over from before the window, "
        f"{stats.drawn_durations} run times drawn); dropped {stats.pending_dropped} never scheduled, "
        f"{stats.unfit_dropped} fitting no sampled node"
    )


def usage_sweep(
    scenario: Scenario,
    levels: Sequence[float],
    seeds: Sequence[int],
    policies: Sequence[str],
    builder: PolicyBuilder = default_builder,
    progress: bool = True,
    information: str = ESTIMATED,
) -> list[tuple[float, ScenarioSummary]]:
    """The benchmark at each usage level: CPU and memory used/requested means both set to the level."""
    if scenario.trace is None:
        raise ConfigError(f"scenario {scenario.name} has no trace: section")
    out = []
    for level in levels:
        usage = scenario.trace.usage.model_copy(update={"cpu_ratio": level, "mem_ratio": level})
        spec = scenario.trace.model_copy(update={"usage": usage})
        sc = scenario.model_copy(update={"trace": spec, "name": f"{scenario.name}-usage-{level:g}"})
        out.append((level, summarise(run_trace_bench(sc, seeds, policies, builder, progress, information=information))))
    return out


def format_sweep(results: list[tuple[float, ScenarioSummary]]) -> str:
    """Markdown: per usage level, the policies ranked by composite, and drs against the best heuristic."""
    lines = [
        "| used/requested | ranking by composite (lower is better) | drs vs best heuristic [95% CI] |",
        "| --- | --- | --- |",
    ]
    for level, s in results:
        ranked = ", ".join(f"{p} {c:.3f}" for p, c in sorted(s.composite.items(), key=lambda kv: kv[1]))
        v = s.vs_best_baseline.get("drs")
        vs = (
            f"{v['mean']:+.4f} [{v['ci_low']:+.4f}, {v['ci_high']:+.4f}] vs {v['against']}"
            if v and not math.isnan(v["mean"])
            else "-"
        )
        lines.append(f"| {level:g} | {ranked} | {vs} |")
    return "\n".join(lines)
