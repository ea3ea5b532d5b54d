"""Learning the user's own cluster, shown end to end: history -> real Prometheus -> ``retrain`` -> bench.

``benchmarks/retrain_on_history.py`` runs it; the suite runs a short version. Steps:

1. **the cluster**: a generated cluster (``drs_prom.sim.generator``) from a seed outside both the
   training seeds and the evaluation clusters, so nothing the shipped model was trained or
   selected on;
2. **its history**: the shipped ``drs`` model schedules ``hours`` of the cluster's workload
   (the workload repeated; seed ``HISTORY_SEED``) in the simulator, as it would in the cluster;
   what it leaves behind is written as a real deployment has it: node_exporter series backfilled
   into a real Prometheus with ``promtool tsdb create-blocks-from openmetrics``, and the
   scheduler's journal (decisions and pod ends) in SQLite;
3. **retraining**: ``retrain.retrain_run.run_once``, the same code as ``drs-prom retrain --once``, reads
   that journal and Prometheus, builds the cluster's twin (``retrain.twin``), fine-tunes the
   shipped model there and gates it; once per retraining seed, each in its own model store;
4. **the future**: the promoted model, the shipped one and the heuristics schedule the
   cluster's workload on ``eval_seeds`` seeds none of the above used; composite scores are
   paired per seed. A candidate the gate rejected is benchmarked too (labelled so): the
   scheduler would keep the current model, and the row shows whether the gate was right.

The gain is reported against the shipped model as the benchmark runs it (its own training
scales) and as the scheduler would run it on this cluster (the cluster's scales), with a paired
95 % interval over the evaluation seeds and the spread over retraining seeds.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.agent import load_model
from drs_prom.agent.persistence import model_policy
from drs_prom.config import Settings
from drs_prom.outcomes.objectives import score_episode
from drs_prom.registry import PolicySpec, make_policy
from drs_prom.retrain.retrain_run import run_once
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.backfill import create_blocks, write_openmetrics
from drs_prom.sim.bench import run_bench
from drs_prom.sim.env import scenario_spec
from drs_prom.sim.generator import EVAL_SEED_BASE, TRAIN_SEEDS, generate_scenario
from drs_prom.sim.retrain_checks import SimulatorChecks
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.trace import journal_rows, run_sim
from drs_prom.stores.journal import Journal
from drs_prom.stores.model_store import MODEL_FILE, ModelStore
from drs_prom.testbed.prom_server import start_prometheus

CLUSTER_SEED = 8_000_000
HISTORY_SEED = 50
EVAL_SEED_BASE_OWN = 1000
BASELINES = ("kube-default", "capacity-balanced-overload")
SHIPPED = "drs (shipped)"
SHIPPED_OWN_SCALES = "drs (shipped, cluster scales)"


@dataclass
class OwnClusterReport:
    cluster: str
    description: str
    history_hours: float
    decisions: int
    pod_ends: int
    samples: int
    retrains: list[dict[str, Any]] = field(default_factory=list)
    eval_seeds: list[int] = field(default_factory=list)
    composite: dict[str, list[float]] = field(default_factory=dict)
    gains: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def own_cluster(seed: int = CLUSTER_SEED) -> Scenario:
    """The demonstration's cluster: generated, from a seed no training or evaluation uses."""
    if seed in TRAIN_SEEDS or EVAL_SEED_BASE <= seed < EVAL_SEED_BASE + 1000:
        raise ValueError(f"cluster seed {seed} is a training or evaluation seed")
    return generate_scenario(seed, name=f"own-{seed}")


def workload_span(scenario: Scenario) -> float:
    """Seconds the scenario's arrivals take (phases back to back, gaps included)."""
    return float(sum(p.pods / p.rate_per_second + p.gap_seconds for p in scenario.arrivals))


def history_scenario(scenario: Scenario, hours: float) -> Scenario:
    """The cluster's workload repeated until it covers ``hours``."""
    reps = max(1, math.ceil(hours * 3600.0 / max(workload_span(scenario), 1.0)))
    return scenario.with_changes(arrivals=[p.model_dump() for p in scenario.arrivals] * reps)


def _settings(
    tmp: Path, url: str, scenario: Scenario, step: float, retrain: dict[str, Any], model: str | None = None
) -> Settings:
    window = max(scenario.metric_window_seconds, 2 * step)  # rate() needs two samples in its window
    return Settings.model_validate(
        {
            "prometheus": {"url": url, "window": f"{window:g}s", "max_sample_age_seconds": 4 * step + window},
            "normalisation": scenario.norm.model_dump(),
            "scheduler": {
                "settle_seconds": scenario.settle_seconds,
                "journal_path": str(tmp / "journal.sqlite"),
                **({"model_path": model} if model else {}),
            },
            "retrain": {
                "lookback_seconds": 30 * 86400.0,
                "query_step_seconds": step,
                "twin": True,
                "min_transitions": 32,
                **retrain,
            },
        }
    )


def _paired(base: np.ndarray, new: np.ndarray) -> dict[str, float]:
    """Mean gain (base - new: positive = lower composite = better), its sd and 95 % half-width, as a ratio too."""
    d = base - new
    sd = float(d.std(ddof=1)) if len(d) > 1 else float("nan")
    return {
        "mean_gain": float(d.mean()),
        "sd": sd,
        "ci95": 1.96 * sd / math.sqrt(len(d)) if len(d) > 1 else float("nan"),
        "ratio": float(new.mean() / base.mean()),
    }


def demonstrate(
    cluster_seed: int = CLUSTER_SEED,
    hours: float = 3.0,
    eval_seeds: int = 10,
    retrain_seeds: Sequence[int] = (0, 1, 2),
    episodes: int = 1,
    epochs: int = 10,
    imitate_steps: int = 10000,
    step: float = 5.0,
    workdir: str | Path | None = None,
    echo: Any = print,
    start_model: str | Path | None = None,
) -> OwnClusterReport:
    """Run the demonstration (module docstring); every process it starts is stopped before it returns.

    ``episodes``, ``epochs``, ``imitate_steps``: retrain.sim_replay_episodes, epochs, twin_imitate_steps.
    ``start_model``: the model the scheduler runs and retraining starts from (default: the shipped one; a
    heuristic-guided model is not fine-tuned from history, so a per-node model such as models/drs-v1.keras
    is what this shows retraining on)."""
    retrain = {"sim_replay_episodes": episodes, "epochs": epochs, "twin_imitate_steps": imitate_steps}
    with tempfile.TemporaryDirectory(prefix="drs-own-", dir=workdir) as tmp_name:
        start = str(start_model) if start_model else None
        return _demonstrate(Path(tmp_name), cluster_seed, hours, eval_seeds, retrain_seeds, retrain, step, echo, start)


def _demonstrate(
    tmp: Path,
    cluster_seed: int,
    hours: float,
    eval_seeds: int,
    retrain_seeds: Sequence[int],
    retrain: dict[str, Any],
    step: float,
    echo: Any,
    start_model: str | None = None,
) -> OwnClusterReport:
    secs: dict[str, float] = {}
    t0 = time.perf_counter()
    sc = own_cluster(cluster_seed)
    echo(f"cluster {sc.name}: {sc.description}")
    shipped = load_model(start_model)
    history = history_scenario(sc, hours)
    run = run_sim(history, shipped.policy(scenario_spec(history).metric_window_seconds), seed=HISTORY_SEED)
    tail = 600.0  # the cluster idles on after the last pod, so the last rewards settle
    end = run.duration + tail
    run.epoch = float(np.floor((time.time() - end - 1800.0) / step) * step)  # blocks well before the head
    secs["history_sim"] = time.perf_counter() - t0

    t = time.perf_counter()
    journal = Journal(tmp / "journal.sqlite")
    for decision in journal_rows(run, "drs"):
        journal.append(decision)
    for uid, ts in run.pod_ends().items():
        journal.pod_ended(uid, ts)
    journal.close()
    times = np.arange(0.0, end + step / 2, step)
    counters, mem = run.counters(times)
    samples = write_openmetrics(tmp / "history.om", run.nodes(), run.epoch + times, counters, mem)
    create_blocks(tmp / "history.om", tmp / "tsdb")
    secs["backfill"] = time.perf_counter() - t
    report = OwnClusterReport(
        cluster=sc.name,
        description=sc.description,
        history_hours=run.duration / 3600.0,
        decisions=len(run.decisions),
        pod_ends=len(run.finish),
        samples=samples,
    )
    echo(f"history: {report.decisions} decisions over {report.history_hours:.2f} h, {samples} samples backfilled")

    prom = start_prometheus(tmp / "prom", storage_path=tmp / "tsdb", extra_args=["--storage.tsdb.retention.time=100y"])
    models: dict[str, Path] = {}
    try:
        for rseed in retrain_seeds:
            t = time.perf_counter()
            settings = _settings(
                tmp,
                prom.url,
                sc,
                step,
                {"model_store": str(tmp / f"store-{rseed}"), "seed": int(rseed), **retrain},
                start_model,
            )
            source = PrometheusSource(settings.prometheus)
            reader = Journal(settings.scheduler.journal_path)
            store = ModelStore(settings.retrain.model_store, settings.retrain.keep_versions)
            try:
                res = run_once(settings, source, reader, store, simulator=SimulatorChecks(settings))
            finally:
                reader.close()
                source.close()
            meta = load_model(store.get(res.version).path / MODEL_FILE).meta if res.version else {}
            entry = {
                "seed": int(rseed),
                "result": res.result,
                "reason": res.reason,
                "version": res.version,
                "transitions": res.transitions,
                "twin": meta.get("training", {}).get("twin", ""),
                "gate": res.scores,
                "versus_best_heuristic": meta.get("gate", {}).get("versus_best_heuristic"),
                "seconds": round(time.perf_counter() - t, 1),
            }
            report.retrains.append(entry)
            echo(f"retrain seed {rseed}: {res.result} ({res.reason}); {entry['twin']}; {entry['seconds']} s")
            if res.version:  # a rejected candidate is benchmarked too: was the gate right?
                label = "retrained" if res.result == "promoted" else "rejected candidate"
                models[f"drs ({label}, seed {rseed})"] = store.get(res.version).path / MODEL_FILE
    finally:
        prom.stop()

    t = time.perf_counter()
    seeds = list(range(EVAL_SEED_BASE_OWN, EVAL_SEED_BASE_OWN + eval_seeds))
    report.eval_seeds = seeds
    names = [*BASELINES, SHIPPED, SHIPPED_OWN_SCALES, *models]
    loaded = {name: load_model(path) for name, path in models.items()}  # once, not per seed

    def build(name: str, seed: int, spec: PolicySpec) -> Any:
        window = spec.metric_window_seconds
        if name == SHIPPED:  # as `drs-prom bench` runs it: on the scales it was trained with
            return shipped.policy(window, name=name)
        if name == SHIPPED_OWN_SCALES:  # as the scheduler runs it here: the cluster's scales (whatever its head)
            own_scales = {**shipped.meta, "normalisation": None}
            return model_policy(shipped.layers, own_scales, window, shipped.version, name)
        if name in loaded:  # a fresh policy per run: its recent-bind memory starts empty
            return loaded[name].policy(window, name=name)
        return make_policy(name, spec, seed)

    bench = run_bench(sc, seeds, names, build, progress=False)
    for row in bench.rows:
        report.composite[row.policy] = [score_episode(r) for r in row.runs]
    secs["bench"] = time.perf_counter() - t
    for name in models:
        new = np.array(report.composite[name])
        for ref in (SHIPPED, SHIPPED_OWN_SCALES):
            report.gains[f"{name} vs {ref}"] = _paired(np.array(report.composite[ref]), new)
    secs["total"] = time.perf_counter() - t0
    report.seconds = {k: round(v, 1) for k, v in secs.items()}
    return report


def format_report(report: OwnClusterReport) -> str:
    """The per-policy composite table and the paired gains, as text."""
    lines = [f"{report.cluster}: {report.description}", "", "| policy | mean composite | per seed |", "|---|---|---|"]
    for name, values in report.composite.items():
        lines.append(f"| {name} | {np.mean(values):.3f} | {' '.join(f'{v:.2f}' for v in values)} |")
    lines.append("")
    for key, g in report.gains.items():
        lines.append(
            f"{key}: gain {g['mean_gain']:+.3f} (x{g['ratio']:.3f}), paired sd {g['sd']:.3f}, 95% CI +-{g['ci95']:.3f}"
        )
    means = [
        float(np.mean(v)) for k, v in report.composite.items() if k.startswith(("drs (retrained", "drs (rejected"))
    ]
    if len(means) > 1:
        lines.append(
            f"spread over retraining seeds: sd {np.std(means, ddof=1):.3f} of the mean composite {np.mean(means):.3f}"
        )
    return "\n".join(lines)
