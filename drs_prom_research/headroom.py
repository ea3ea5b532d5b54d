"""How much any policy could still gain over the best heuristic of a scenario, by a reference that knows the future.

Per scenario and seed (paired, one workload per seed): every heuristic of the suite and the
shipped ``drs`` are run as the benchmark runs them; the scenario's best heuristic (lowest
mean composite) is the base of a clairvoyant fortified rollout (drs_prom_research.clairvoyant,
branching on the base's ``top_k`` nodes per decision, never worse than the base). Its gain
over the base is the *headroom*: what foresight of arrivals, work and demand buys on this
workload. A learned policy sees only the present, so it can at best capture part of it; where
the headroom is a few per cent, "beating the best heuristic" is a contest inside that margin.

Also reported: the per-seed heuristic oracle (the best heuristic chosen after the fact for each
seed), which bounds what choosing among the heuristics can gain.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass

import numpy as np

from drs_prom.sim.bench import model_builder, run_bench
from drs_prom.sim.suite import resolve_scenario, summarise
from drs_prom_research.clairvoyant import clairvoyant_run
from drs_prom_research.lookahead import lookahead_run

SUITE_HEURISTICS = (
    "kube-default",
    "least-loaded",
    "balanced-load",
    "capacity-balanced",
    "capacity-balanced-overload",
    "trimaran-tlp",
    "trimaran-lvrb",
)
"""The heuristics the suite's README table compares (every strong baseline the field ships)."""


@dataclass
class Headroom:
    """One scenario's composites (means over seeds; lower is better) and the relative gaps to its best heuristic."""

    scenario: str
    n_nodes: int
    pods: int
    seeds: list[int]
    best_heuristic: str
    best_heuristic_composite: float
    clairvoyant_composite: float
    headroom: float  # mean over seeds of 1 - clairvoyant / best heuristic
    headroom_min: float
    headroom_max: float
    oracle_gain: float  # mean over seeds of 1 - min over heuristics / best heuristic
    drs_composite: float
    drs_gap: float  # mean over seeds of drs / best heuristic - 1 (negative: drs is better)
    top_k: int
    wall_seconds: float
    samples: int = 0  # sampled futures of the look-ahead rollout (0: not run)
    lookahead_composite: float = math.nan
    lookahead_gain: float = math.nan  # mean over seeds of 1 - look-ahead / best heuristic (may be negative)
    gate: float = 0.0  # the look-ahead leaves the heuristic only when its paired saving exceeds gate x its SE
    veil: bool = False  # the look-ahead also draws the present pods' run time and unstarted pods' demand


def scenario_headroom(
    name: str,
    seeds: Sequence[int],
    top_k: int = 3,
    model_path: str | None = None,
    with_drs: bool = True,
    pods: int | None = None,
    samples: int = 0,
    gate: float = 0.0,
    veil: bool = False,
) -> Headroom:
    """Bench the heuristics (and drs) on ``name`` (its first ``pods`` pods if given) and run the clairvoyant
    rollout over the best of them; with ``samples`` > 0 also the look-ahead over sampled futures
    (drs_prom_research.lookahead), which sees no more of the future than a scheduler could, gated by ``gate`` and,
    with ``veil``, not even the present pods' run times."""
    t0 = time.perf_counter()
    scenario = resolve_scenario(name)
    if pods:
        scenario = scenario.truncated(pods)
    policies = [*SUITE_HEURISTICS, *(["drs"] if with_drs else [])]
    report = run_bench(scenario, list(seeds), policies, model_builder(model_path), progress=False)
    best = summarise(report).best_baseline
    by = {r.policy: {x.seed: x.composite for x in r.runs} for r in report.rows if r.runs and not r.skipped}
    base = by[best]
    seer = {s: clairvoyant_run(scenario, s, base=best, top_k=top_k).composite for s in seeds}
    gains = [1.0 - seer[s] / base[s] for s in seeds]
    oracle = [1.0 - min(by[h][s] for h in SUITE_HEURISTICS if h in by) / base[s] for s in seeds]
    drs = by.get("drs")
    look = {s: lookahead_run(scenario, s, best, samples, top_k, gate, veil).composite for s in seeds} if samples else {}
    return Headroom(
        scenario=name,
        n_nodes=scenario.n_nodes,
        pods=scenario.n_pods,
        seeds=list(seeds),
        best_heuristic=best,
        best_heuristic_composite=float(np.mean(list(base.values()))),
        clairvoyant_composite=float(np.mean(list(seer.values()))),
        headroom=float(np.mean(gains)),
        headroom_min=float(min(gains)),
        headroom_max=float(max(gains)),
        oracle_gain=float(np.mean(oracle)),
        drs_composite=float(np.mean(list(drs.values()))) if drs else math.nan,
        drs_gap=float(np.mean([drs[s] / base[s] - 1.0 for s in seeds])) if drs else math.nan,
        top_k=top_k,
        wall_seconds=time.perf_counter() - t0,
        samples=samples,
        gate=gate,
        veil=veil,
        lookahead_composite=float(np.mean(list(look.values()))) if look else math.nan,
        lookahead_gain=float(np.mean([1.0 - look[s] / base[s] for s in seeds])) if look else math.nan,
    )


def _one(
    name: str, seeds: list[int], top_k: int, model_path: str | None, samples: int, gate: float, veil: bool
) -> dict:
    return asdict(scenario_headroom(name, seeds, top_k, model_path, samples=samples, gate=gate, veil=veil))


def run_headroom(
    names: Sequence[str],
    seeds: Sequence[int],
    top_k: int = 3,
    model_path: str | None = None,
    jobs: int = 1,
    echo: Callable[[dict], None] | None = None,
    samples: int = 0,
    gate: float = 0.0,
    veil: bool = False,
) -> list[dict]:
    """scenario_headroom for each of ``names`` in ``jobs`` processes; ``echo`` gets each row as it finishes."""
    rows: dict[str, dict] = {}
    args = [(n, list(seeds), top_k, model_path, samples, gate, veil) for n in names]
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(_one, *a): a[0] for a in args}
        for fut in as_completed(futures):
            rows[futures[fut]] = fut.result()
            if echo is not None:
                echo(rows[futures[fut]])
    return [rows[n] for n in names]


def format_headroom(rows: Sequence[dict]) -> str:
    """A Markdown table, one scenario per row, in per cent of the best heuristic's composite: gains are how much
    lower a reference's composite is (negative: higher, worse), the shipped drs's column how much higher its is."""
    lines = [
        "| scenario | nodes / pods | best heuristic (composite) | clairvoyant gain over it, mean [min, max] "
        "| look-ahead gain over it | per-seed heuristic oracle gain | shipped drs vs it (+ = worse) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        look = "-" if math.isnan(r.get("lookahead_gain", math.nan)) else f"{100 * r['lookahead_gain']:.1f} %"
        lines.append(
            f"| {r['scenario']} | {r['n_nodes']} / {r['pods']} | {r['best_heuristic']} "
            f"({r['best_heuristic_composite']:.3f}) | {100 * r['headroom']:.1f} % "
            f"[{100 * r['headroom_min']:.1f}, {100 * r['headroom_max']:.1f}] | {look} | {100 * r['oracle_gain']:.1f} % "
            f"| {100 * r['drs_gap']:+.1f} % |"
        )
    return "\n".join(lines)
