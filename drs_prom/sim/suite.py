"""``drs-prom bench --suite``: every policy on the packaged scenarios and the 20 generated evaluation clusters.

Per scenario, each seed's workload is generated once and every policy replays it (run_bench),
so per-seed differences are paired. The suite ranks policies by the composite score
(drs_prom.outcomes.objectives) and, for every policy, reports the paired difference of its
composite to the *best baseline* of that scenario (the heuristic with the lowest mean
composite, the policy itself excluded) with a 95 % Student-t confidence interval over
seeds: a learned policy "wins" a scenario only if that interval is below zero. The candidate
(``drs`` unless ``--candidate`` names another) is also judged (drs_prom.sim.verdicts): its paired
interval relative to the best heuristic, the seeds used, and the "harm" and "inferior" flags;
``--seeds auto`` runs each scenario until that interval is within +-2 % (10 to 100 seeds).

Scenarios run in parallel processes with ``jobs`` > 1 (each process builds its own
policies; results come back through the pool). cluster-500 (a speed scenario, 5000 pods
on 500 nodes) and constraints (hard constraints, where the constraints alone set every policy's
completion times) are left out of the suite; pass them to ``bench --scenario`` on their own. So are the drifting
scenarios of the rebalancer (``REBALANCING``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drs_prom.errors import ConfigError
from drs_prom.outcomes.objectives import OBJECTIVES
from drs_prom.outcomes.paired_stats import paired_ci
from drs_prom.registry import HEURISTICS
from drs_prom.sim.bench import LEARNED, REFERENCE, BenchReport, information_text, model_builder, reference_names
from drs_prom.sim.bench_results import json_default
from drs_prom.sim.env import ESTIMATED
from drs_prom.sim.generator import EVAL_CLUSTERS, resolve_scenario
from drs_prom.sim.scenario import scenario_names
from drs_prom.sim.verdicts import CANDIDATE, interval_text, judge, run_judged

LEFT_OUT = ("cluster-500", "constraints")
"""Packaged scenarios the suite skips: a pure speed test (minutes per policy), and the hard-constraint scenario,
which tests feasibility, not placement quality."""

REBALANCING = ("drift-steps", "drift-daily", "drift-neighbours", "drift-leak", "drift-hetero", "drift-mixed")
"""Packaged scenarios whose load moves after placement (hours of long-lived services): they judge a rebalancer
beside a policy (``bench --scenario drift-steps --policies kube-default,kube-default+rebalance``,
docs/rebalance.md), not placement alone, and the suite leaves them out too."""


def suite_names(only: Sequence[str] | None = None) -> list[str]:
    """Packaged scenarios (minus LEFT_OUT) then the 20 evaluation clusters, or ``only`` (checked)."""
    every = [n for n in scenario_names() if n not in LEFT_OUT and n not in REBALANCING] + list(EVAL_CLUSTERS)
    if not only:
        return every
    for name in only:
        if name not in every and name not in scenario_names():
            raise ConfigError(f"unknown suite scenario {name!r}; known: {', '.join(every)}")
    return list(only)


@dataclass
class ScenarioSummary:
    """The suite's verdict on one scenario (means over seeds; composite lower is better)."""

    scenario: str
    n_nodes: int
    pods: int
    composite: dict[str, float]
    objectives: dict[str, dict[str, float]]
    ratio_to_reference: dict[str, dict[str, float]]  # policy -> objective/composite -> ratio to kube-default
    best: str  # lowest mean composite of all policies run (reference runs excluded: bench.ReferenceRun)
    best_baseline: str  # lowest mean composite among the heuristics
    vs_best_baseline: dict[str, dict[str, float]]  # policy -> mean, ci_low, ci_high, relative
    wall_seconds: float
    skipped: dict[str, str] = field(default_factory=dict)
    seeds: int = 0  # seeds the scenario ran (with --seeds auto, per scenario)
    judged: dict | None = None  # the candidate's Judgement (drs_prom.sim.verdicts), None if it did not run

    def to_json(self) -> dict:
        return self.__dict__.copy()


def _is_heuristic(policy: str) -> bool:
    return policy in HEURISTICS and policy not in LEARNED


def summarise(report: BenchReport, candidate: str = CANDIDATE) -> ScenarioSummary:
    """Composite ranking, ratios to kube-default, paired CIs against the best baseline, the candidate judged."""
    rows = {r.policy: r for r in report.rows if r.runs and not r.skipped}
    comp = {p: float(np.mean([x.composite for x in r.runs])) for p, r in rows.items()}
    objs = {
        p: {k: float(np.mean([x.objective_dict()[k] for x in r.runs])) for k in OBJECTIVES} for p, r in rows.items()
    }
    ratios: dict[str, dict[str, float]] = {}
    ref = objs.get(REFERENCE)
    for p in rows:
        if ref is None:
            break
        vals = objs[p] | {"composite": comp[p]}
        base = ref | {"composite": comp[REFERENCE]}
        ratios[p] = {k: (v / base[k] if base[k] else math.nan) for k, v in vals.items()}
    heur = [p for p in comp if _is_heuristic(p)]
    ranked = [p for p in comp if p not in reference_names()]
    best = min(ranked, key=lambda p: comp[p]) if ranked else ""
    best_baseline = min(heur, key=lambda p: comp[p]) if heur else ""
    vs: dict[str, dict[str, float]] = {}
    for p, r in rows.items():
        others = [h for h in heur if h != p]
        if not others:
            continue
        bb = min(others, key=lambda h: comp[h])
        by_seed = {x.seed: x.composite for x in rows[bb].runs}
        diffs = [x.composite - by_seed[x.seed] for x in r.runs if x.seed in by_seed]
        mean, lo, hi = paired_ci(diffs)
        vs[p] = {"against": bb, "mean": mean, "ci_low": lo, "ci_high": hi, "relative": mean / comp[bb]}  # type: ignore[dict-item]
    return ScenarioSummary(
        scenario=report.scenario,
        n_nodes=report.n_nodes,
        pods=report.pods,
        composite=comp,
        objectives=objs,
        ratio_to_reference=ratios,
        best=best,
        best_baseline=best_baseline,
        vs_best_baseline=vs,
        wall_seconds=report.wall_seconds,
        skipped={r.policy: r.skipped for r in report.rows if r.skipped},
        seeds=len(report.seeds),
        judged=j.to_json() if (j := judge(report, candidate)) is not None else None,
    )


def _bench_one(
    name: str,
    seeds: list[int] | None,
    policies: list[str],
    model_path: str | None,
    pods: int | None,
    candidate: str,
    information: str,
) -> dict:
    """One scenario in a worker process: the bench JSON and the summary (plain data across the pool);
    ``seeds`` None: --seeds auto (drs_prom.sim.verdicts.run_judged)."""
    sc = resolve_scenario(name)
    if pods:
        sc = sc.truncated(pods)
    report = run_judged(
        sc, seeds, policies, model_builder(model_path), candidate=candidate, progress=False, information=information
    )
    return {"bench": report.to_json(), "summary": summarise(report, candidate).to_json()}


@dataclass
class SuiteResult:
    seeds: list[int] | None  # None: --seeds auto (each scenario's seeds are in its summary)
    policies: list[str]
    scenarios: list[dict]  # per scenario: {"bench": ..., "summary": ...}
    wall_seconds: float
    candidate: str = CANDIDATE
    information: str = ESTIMATED

    def summaries(self) -> list[dict]:
        return [s["summary"] for s in self.scenarios]

    def to_json(self) -> dict:
        wins: dict[str, int] = {}
        for s in self.summaries():
            wins[s["best"]] = wins.get(s["best"], 0) + 1
        return {
            "seeds": "auto" if self.seeds is None else self.seeds,
            "candidate": self.candidate,
            "information": self.information,
            "policies": self.policies,
            "reference": REFERENCE,
            "wall_seconds": self.wall_seconds,
            "wins": wins,
            "scenarios": self.scenarios,
        }


def run_suite(
    names: Sequence[str],
    seeds: Sequence[int] | None,
    policies: Sequence[str],
    model_path: str | None = None,
    jobs: int = 1,
    pods: int | None = None,
    echo: Callable[[str], None] | None = None,
    partial_dir: str | Path | None = None,
    candidate: str = CANDIDATE,
    information: str = ESTIMATED,
) -> SuiteResult:
    """Bench every scenario of ``names`` (in ``jobs`` processes); ``echo`` gets one line per finished scenario.
    ``seeds`` None: --seeds auto, per scenario (drs_prom.sim.verdicts.run_judged); ``candidate``: the policy judged.

    ``partial_dir``: each finished scenario is also written there at once (``<name>.json``),
    so a long suite that is interrupted keeps what it measured.
    """
    t0 = time.perf_counter()
    given = None if seeds is None else list(seeds)
    args = [(n, given, list(policies), model_path, pods, candidate, information) for n in names]
    done: dict[str, dict] = {}

    def note(name: str, res: dict) -> None:
        done[name] = res
        if partial_dir is not None:
            part = Path(partial_dir)
            part.mkdir(parents=True, exist_ok=True)
            (part / f"{name}.json").write_text(json.dumps(res, default=json_default))
        if echo is not None:
            s = res["summary"]
            echo(
                f"[{len(done)}/{len(names)}] {name}: best {s['best']} ({s['composite'].get(s['best'], math.nan):.3f}), "
                f"{s['seeds']} seeds, {s['wall_seconds']:.0f} s"
            )

    if jobs <= 1:
        for a in args:
            note(a[0], _bench_one(*a))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(_bench_one, *a): a[0] for a in args}
            for fut in as_completed(futures):
                note(futures[fut], fut.result())
    return SuiteResult(
        given, list(policies), [done[n] for n in names], time.perf_counter() - t0, candidate, information
    )


TABLE_POLICIES = (
    "kube-default",
    "balanced-load",
    "capacity-balanced",
    "capacity-balanced-overload",
    "trimaran-tlp",
    "trimaran-lvrb",
    "drs",
)


def format_suite(result: SuiteResult) -> str:
    """Per scenario: the best policy by composite, then each listed policy's composite ratio to kube-default,
    for drs (when run) its paired difference to the best baseline with the 95 % CI, and the candidate judged:
    the seeds used, its paired 95 % interval relative to the best heuristic and its flags (harm, inferior)."""
    cols = [p for p in TABLE_POLICIES if p in result.policies]
    cand = result.candidate
    head = ["scenario", "best (composite)", *cols]
    if "drs" in result.policies:
        head.append("drs - best baseline [95% CI]")
    head += ["seeds", f"{cand} vs best heuristic [95% CI]", "flags"]
    lines = [head]
    ratios, harmed, inferior, judged = [], [], [], 0
    for s in result.summaries():
        comp = s["composite"]
        best = f"{s['best']} ({comp[s['best']]:.3f})" if s["best"] else "-"
        cells = [s["scenario"], best]
        for p in cols:
            r = s["ratio_to_reference"].get(p, {}).get("composite", math.nan)
            cells.append("skipped" if p in s["skipped"] else f"{r:.3f}x")
        if "drs" in result.policies:
            v = s["vs_best_baseline"].get("drs")
            cells.append(
                "-"
                if not v
                else f"{100 * v['relative']:+.1f}% [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}] vs {v['against']}"
            )
        j = s.get("judged")
        cells.append(str(s.get("seeds", "-")))
        if j:
            judged += 1
            ratios.append(1.0 + j["mean"])
            harmed += [s["scenario"]] if j["harm"] else []
            inferior += [s["scenario"]] if j["inferior"] else []
            cells.append(f"{interval_text(j['mean'], j['low'], j['high'])} vs {j['against']}")
            cells.append(", ".join(f for f in ("harm", "inferior") if j[f]) or "-")
        else:
            cells += ["-", "-"]
        lines.append(cells)
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    wins = result.to_json()["wins"]
    seeds = "auto (10-100 per scenario, see seeds)" if result.seeds is None else str(len(result.seeds))
    title = (
        f"suite: {len(result.scenarios)} scenarios x {seeds} seeds; columns: composite (lower is better) "
        f"as a ratio to {REFERENCE}; {information_text(result.information)}"
    )
    tally = "best composite per scenario: " + ", ".join(
        f"{p} {n}" for p, n in sorted(wins.items(), key=lambda x: -x[1])
    )
    verdict = []
    if judged:
        verdict.append(
            f"{cand} judged on {judged} scenarios: median {cand} / best heuristic {float(np.median(ratios)):.3f}; "
            f"harm on {len(harmed)}{' (' + ', '.join(harmed) + ')' if harmed else ''}; "
            f"inferior on {len(inferior)}{' (' + ', '.join(inferior) + ')' if inferior else ''} "
            "(harm: composite > 1.02x or p95 slowdown > 1.05x kube-default; inferior: upper end of the paired 95% "
            "interval against the best heuristic above +3%)"
        )
    return "\n".join([title, *out, tally, *verdict, f"wall {result.wall_seconds:.0f} s"])


def format_scenario(summary: dict) -> str:
    """Markdown table of one scenario: composite and every objective per policy, mean over seeds
    with the ratio to kube-default, and the paired difference to the best baseline [95 % CI]."""
    keys = ["composite", *OBJECTIVES]
    head = ["policy", *keys, "vs best baseline [95% CI]"]
    rows = [head, ["---"] * len(head)]
    for p, comp in sorted(summary["composite"].items(), key=lambda kv: kv[1]):
        vals = summary["objectives"][p] | {"composite": comp}
        ratio = summary["ratio_to_reference"].get(p, {})
        cells = [p] + [f"{vals[k]:.3f} ({ratio.get(k, math.nan):.2f}x)" for k in keys]
        v = summary["vs_best_baseline"].get(p)
        cells.append(f"{v['mean']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}] vs {v['against']}" if v else "-")
        rows.append(cells)
    for p, why in summary["skipped"].items():
        rows.append([p, f"skipped: {why}"] + [""] * (len(head) - 2))
    title = (
        f"### {summary['scenario']} ({summary['n_nodes']} nodes, {summary['pods']} pods): "
        f"best {summary['best']}, best baseline {summary['best_baseline']}"
    )
    return "\n".join([title, "", *("| " + " | ".join(r) + " |" for r in rows)])


def write_suite(result: SuiteResult, out_dir: str | Path) -> Path:
    """suite.json, suite.md (the summary and one objectives table per scenario) and one Pareto PNG per
    scenario (pareto-<scenario>.png)."""
    from drs_prom.sim.bench_plots import plot_pareto

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "suite.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result.to_json(), indent=1, default=json_default))
    tmp.replace(path)
    md = ["```", format_suite(result), "```", "", *(format_scenario(x) + "\n" for x in result.summaries())]
    (out / "suite.md").write_text("\n".join(md))
    for s in result.scenarios:
        plot_pareto(s["bench"], out / f"pareto-{s['bench']['scenario']}.png")
    return path
