"""The benchmark: every policy on the identical seeded workloads, summarised as ratios to kube-default.

For each seed the workload is generated once from (scenario, seed), and every policy
replays it from the same start, so differences are the policies' alone. A policy that
cannot run (no model shipped yet, drs-original on a cluster size it was not trained
for) is skipped with its one-line reason instead of aborting the benchmark.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from drs_prom.agent import default_model_path
from drs_prom.config import ObjectiveSettings
from drs_prom.errors import ConfigError, DrsError
from drs_prom.outcomes.objectives import TERMS, composite_definition
from drs_prom.policies.contract import Policy
from drs_prom.registry import HEURISTICS, LEARNED, TEACHERS, PolicySpec, make_policy, policies_by_name
from drs_prom.sim.bench_plots import plot_report
from drs_prom.sim.bench_results import METRICS, REFERENCE, BenchReport, PolicyRow, json_default
from drs_prom.sim.env import ESTIMATED, TOLD, EpisodeResult, SchedulingEnv, policy_norm, scenario_spec
from drs_prom.sim.rebalance_report import pairs_text
from drs_prom.sim.rebalancer import SimRebalancer, rebalance_settings
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.sim.table import format_columns

PolicyBuilder = Callable[[str, int, PolicySpec], Policy]
"""``builder(name, seed, spec) -> Policy``; drs_prom.registry.make_policy unless a caller builds its own."""


def default_builder(name: str, seed: int, spec: PolicySpec) -> Policy:
    return make_policy(name, spec, seed)


@dataclass(frozen=True)
class ReferenceRun:
    """A run the benchmark can put beside the policies that is not a policy: it may read what no scheduler can
    (the simulated future), to show what is reachable. None ships; the research package registers its own
    (``register_reference``), so the product's benchmark runs policies only unless such a name is asked for."""

    run: Callable[[Scenario, int, PolicySpec], EpisodeResult]
    """``run(scenario, seed, spec)``: one seeded episode on the same workload the policies get."""
    migration_floor: Callable[[Scenario, int], float] | None = None
    """Per seed, the imbalance left if running pods could be re-placed at will; DrsError where there is none."""


_REFERENCES: dict[str, ReferenceRun] = {}


def register_reference(name: str, reference: ReferenceRun) -> None:
    """Let ``--policies`` name ``reference`` as ``name`` (a policy name stays a policy)."""
    _REFERENCES[name] = reference


def reference_names() -> tuple[str, ...]:
    """The registered reference runs (none in the shipped package)."""
    return tuple(_REFERENCES)


def run_bench(
    scenario: Scenario,
    seeds: Sequence[int],
    policies: Sequence[str] = HEURISTICS,
    builder: PolicyBuilder = default_builder,
    progress: bool = True,
    spec: PolicySpec | None = None,
    information: str = ESTIMATED,
) -> BenchReport:
    """Run each policy on each seed's workload; policies failing with a DrsError are skipped. Every policy is told
    the pods' usage as ``information`` says (sim.env.INFORMATION): estimated from the stored series by default.

    Every policy is built from ``spec`` (default: the configured one) on this scenario (sim.env.scenario_spec):
    the memory of its recent binds spans the configured rate window, never shorter than the scenario's lag.
    """
    from tqdm import tqdm

    sspec = scenario_spec(scenario, spec)
    t0 = time.perf_counter()
    rows = [PolicyRow(p) for p in policies]
    total = len(rows) * len(seeds) * scenario.n_pods
    with tqdm(total=total, desc=f"bench {scenario.name}", unit="pod", disable=not progress, leave=False) as bar:
        for seed in seeds:
            for row in rows:
                if row.skipped:
                    bar.update(scenario.n_pods)
                    continue
                env: SchedulingEnv | None = None
                try:
                    reference = _REFERENCES.get(row.policy)
                    if reference is not None:
                        result = reference.run(scenario, seed, sspec)
                        bar.update(scenario.n_pods)
                        row.runs.append(result)
                        continue
                    base, suffix = split_rebalance(row.policy)
                    policy = builder(base, seed, sspec)
                    # a learned policy sees load on the scales it was trained with; metrics stay on the scenario's
                    env = SchedulingEnv(
                        scenario,
                        seed=seed,
                        norm=policy_norm(policy, scenario),
                        information=information,
                        rebalancer=sim_rebalancer(scenario, suffix),
                    )
                    result = env.run(policy, seed=seed, on_step=lambda _info: bar.update(1))
                    if suffix:
                        result = replace(result, policy=row.policy)
                except DrsError as exc:
                    row.skipped = str(exc)
                    row.runs.clear()
                    bar.update(scenario.n_pods - (env.decisions if env is not None else 0))
                    continue
                row.runs.append(result)
    report = BenchReport(
        scenario.name,
        list(seeds),
        scenario.n_nodes,
        scenario.n_pods,
        rows,
        wall_seconds=time.perf_counter() - t0,
        information=information,
    )
    floors = [f for p in policies if (f := _floor(p)) is not None]
    if floors:
        report.migration_floor = _migration_floor(floors[0], scenario, seeds)
    return report


def _floor(policy: str) -> Callable[[Scenario, int], float] | None:
    reference = _REFERENCES.get(policy)
    return reference.migration_floor if reference is not None else None


def _migration_floor(floor: Callable[[Scenario, int], float], scenario: Scenario, seeds: Sequence[int]) -> float | None:
    try:
        return float(np.mean([floor(scenario, s) for s in seeds]))
    except DrsError:  # heterogeneous nodes or jittered demand: no floor for this scenario
        return None


def _fmt(value: float, key: str) -> str:
    if math.isnan(value):
        return "-"
    if key == "decisions_per_s":
        return f"{value:,.0f}"
    if key == "utilisation":
        return f"{value:.3f}"
    if key in ("imbalance", "composite", "slowdown_p95", "overload"):
        return f"{value:.3f}"
    return f"{value:.1f}"


def format_table(report: BenchReport) -> str:
    """Plain text table: mean over seeds, with (ratio to kube-default) beside each value; the composite score
    and the terms a reader cannot guess are defined once under it."""
    head = ["policy"] + [title for _, title, _ in METRICS]
    rows = []
    for row in report.rows:
        if row.skipped:
            rows.append([row.policy, f"skipped: {row.skipped}"])
            continue
        cells = [row.policy]
        for key, _, _ in METRICS:
            r = report.ratio(row.policy, key)
            cells.append(f"{_fmt(row.mean(key), key)} ({r:.2f}x)" if not math.isnan(r) else _fmt(row.mean(key), key))
        rows.append(cells)
    higher = " and ".join(t for _, t, d in METRICS if d == "higher")
    title = (
        f"scenario {report.scenario}: {report.n_nodes} nodes, {report.pods} pods x {len(report.seeds)} seeds "
        f"(mean over seeds; (x) = ratio to {REFERENCE}); {information_text(report.information)}"
    )
    out = [title, *format_columns(head, rows)]
    out.append(f"lower is better in every column but {higher}")
    out.append(composite_definition(ObjectiveSettings()))
    out.append(TERMS)
    out.extend(pairs_text(report))
    if report.migration_floor is not None:
        ref = report.row(REFERENCE)
        r = report.migration_floor / ref.mean("imbalance") if ref is not None and ref.runs else math.nan
        out.append(
            f"migration floor (imbalance if running pods could be re-placed at every instant, "
            f"contention-free): {report.migration_floor:.3f} ({r:.2f}x)"
        )
    return "\n".join(out)


def information_text(information: str) -> str:
    """How a report says what its policies were told of the pods' usage."""
    if information == TOLD:
        return "policies TOLD each pod's expected usage (an oracle: what annotating every pod would give)"
    return "pod usage estimated from the stored series (what a live scheduler knows)"


def write_report(report: BenchReport, out_dir: str | Path) -> tuple[Path, Path]:
    """JSON and PNG side by side; written to temp names then renamed so a crash leaves no half file."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"bench-{report.scenario}"
    json_path, png_path = out / f"{stem}.json", out / f"{stem}.png"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=1, default=json_default))
    tmp.replace(json_path)
    plot_report(report, png_path)
    return json_path, png_path


def model_builder(model_path: str | None) -> PolicyBuilder:
    """Like default_builder, but ``drs`` loads ``model_path`` when one is given."""

    def build(name: str, seed: int, spec: PolicySpec) -> Policy:
        return make_policy(name, replace(spec, model_path=model_path) if model_path else spec, seed)

    return build


REBALANCE_SUFFIXES = ("+rebalance", "+rebalance-taint")
"""``<policy>+rebalance``: the policy places, and the rebalancer (drs_prom.sim.rebalancer) moves pods during the
episode, their replacements placed by the same policy (the scheduler that owns them); ``+rebalance-taint``: the same
with ``taint_hot_nodes`` (kube-scheduler's preference against the PreferNoSchedule taint on hot nodes)."""


def split_rebalance(name: str) -> tuple[str, str]:
    """(the placing policy's name, its REBALANCE_SUFFIXES entry, "" when no rebalancer runs beside it)."""
    for suffix in REBALANCE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)], suffix
    return name, ""


def sim_rebalancer(scenario: Scenario, suffix: str) -> SimRebalancer | None:
    """The rebalancer a policy name's suffix asks for on ``scenario`` (sim.rebalancer.rebalance_settings)."""
    if not suffix:
        return None
    settings = rebalance_settings(scenario)
    if suffix.endswith("-taint"):
        settings = settings.model_copy(update={"taint_hot_nodes": True})
    return SimRebalancer(settings, scenario)


def parse_policies(text: str | None) -> list[str]:
    """Comma-separated names (default: every heuristic and both learned policies); ConfigError on unknown.
    ``<policy>+rebalance`` runs the rebalancer beside a known policy."""
    if not text:
        return [*HEURISTICS, *TEACHERS, *LEARNED]
    names = [p.strip() for p in text.split(",") if p.strip()]
    known = policies_by_name()
    for n in names:
        if split_rebalance(n)[0] not in known and n not in _REFERENCES:
            raise ConfigError(f"unknown policy {n!r}; known: {', '.join(sorted([*known, *_REFERENCES]))}")
    if REFERENCE not in names:
        names.insert(0, REFERENCE)  # ratios need the reference
    return names


def shipped_model() -> tuple[str | None, str]:
    """(path of the shipped drs model or None, a one-line note for the user)."""
    path = Path(default_model_path())
    if not path.exists():
        return None, f"no trained model at {path} yet; running the heuristics only"
    return str(path), f"drs is the shipped model {path.stem} ({path})"


def demo(
    seeds: int = 5, out_dir: str | Path = "out/demo", progress: bool = True, echo: Callable[[str], None] = print
) -> BenchReport:
    """drs-paper, every heuristic plus the shipped drs model (and drs-original if shipped), table + plot."""
    model, note = shipped_model()
    echo(note)
    policies = [*HEURISTICS, "drs", "drs-original"] if model else list(HEURISTICS)
    echo(
        "policies: the field's heuristics and the learned ones; `drs-prom bench` also runs the shipped model's "
        f"teachers ({', '.join(TEACHERS)}), which read what only drs-prom's scheduler keeps"
    )
    report = run_bench(
        load_scenario("drs-paper"), list(range(seeds)), policies, model_builder(model), progress=progress
    )
    json_path, png_path = write_report(report, out_dir)
    echo(format_table(report))
    echo(f"plot: {png_path}\nresults: {json_path}")
    return report
