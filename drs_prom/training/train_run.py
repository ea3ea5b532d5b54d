"""``drs-prom train``: build the simulator env, train, save model + JSON metadata + learning curve, benchmark.

One command reproduces a shipped model (models/README.md has the commands).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from drs_prom.agent.networks import export_dense
from drs_prom.agent.numpy_policy import DRSOriginalPolicy, NodeAgentPolicy
from drs_prom.agent.persistence import base_metadata, save_model, update_metadata
from drs_prom.config import Normalisation
from drs_prom.errors import ConfigError
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.training.curves import plot_curve
from drs_prom.training.episodes import Env, EnvFactory, TrainConfig, TrainResult, train
from drs_prom.training.summary import benchmark_summary


def save_result(result: TrainResult, cfg: TrainConfig, out: str | Path, norm: Normalisation, command: str = "") -> Path:
    """Write the model (+ JSON metadata) and its learning curve next to it."""
    meta = base_metadata(cfg.policy, norm, result.n_nodes if cfg.policy == "drs-original" else None)
    conf = asdict(cfg)
    conf["reward"] = cfg.reward.model_dump()
    conf["objectives"] = cfg.objectives.model_dump()
    meta["training"] = {
        "scenario": cfg.scenario,
        "seed": cfg.seed,
        "episodes": cfg.episodes,
        "steps": result.steps,
        "seconds": round(result.seconds, 1),
        "nodes": result.n_nodes,
        "config": conf,
        "command": command,
        "final_imbalance": float(np.mean(result.imbalance[-5:])) if result.imbalance else None,
        **result.notes,
    }
    meta["benchmark"] = {}
    path = save_model(result.model, meta, out)
    plot_curve(result, Path(out).with_suffix(".png"), f"{cfg.policy} on {cfg.scenario} (seed {cfg.seed})")
    return path


def scenario_env_factory(
    scenario: str | Scenario, norm: Normalisation | None = None
) -> tuple[EnvFactory, Normalisation]:
    """Env factory over a simulator scenario (name, path or Scenario), and the normalisation it uses.

    ``"a,b"`` mixes scenarios: episode seed s uses the (s mod 2)-th. They must share a
    normalisation (and, for drs-original, a node count).
    """
    if isinstance(scenario, Scenario):
        scs = [scenario]
    else:
        scs = [load_scenario(name.strip()) for name in str(scenario).split(",") if name.strip()]
    use = norm or scs[0].norm
    if norm is None and any(sc.norm != use for sc in scs):
        raise ConfigError(f"scenarios {scenario} use different normalisations; train on one at a time")

    def make(seed: int) -> Env:
        return SchedulingEnv(scs[seed % len(scs)], seed=seed, norm=use)

    return make, use


def run(
    cfg: TrainConfig,
    out: str | Path,
    drs_scales: bool = False,
    bench_seeds: int = 5,
    generalise: tuple[str, ...] = ("cluster-50",),
    progress: bool = True,
    command: str = "",
    echo: Callable[[str], None] = print,
) -> Path:
    """``drs-prom train``: train, save model + JSON + curve, record a benchmark in the JSON."""
    make_env, norm = scenario_env_factory(cfg.scenario, Normalisation.drs_paper() if drs_scales else None)
    result = train(make_env, cfg, progress=progress)
    path = save_result(result, cfg, out, norm, command=command)
    echo(f"trained {cfg.policy} on {cfg.scenario}: {result.steps} steps in {result.seconds:.0f} s -> {path}")
    echo(f"learning curve: {Path(out).with_suffix('.png')}")
    if bench_seeds and not drs_scales:
        layers = export_dense(result.model)
        policy = (
            NodeAgentPolicy(layers, cfg.recent_window_seconds)
            if cfg.policy == "drs"
            else DRSOriginalPolicy(layers, result.n_nodes)
        )
        trained_on = [name.strip() for name in cfg.scenario.split(",") if name.strip()]
        bench = {name: benchmark_summary(policy, name, bench_seeds) for name in trained_on}
        if cfg.policy == "drs":
            for sc in generalise:
                if sc not in bench:
                    bench[sc] = benchmark_summary(policy, sc, min(bench_seeds, 3), ("kube-default", "balanced-load"))
        update_metadata(path, benchmark=bench)
        for sc, b in bench.items():
            mine = b["policies"].get(cfg.policy, {})
            if mine:
                echo(
                    f"{sc}: imbalance {mine['imbalance']['mean']:.3f} (x{1 / mine['imbalance']['ratio_to_kube_default']:.2f} lower than kube-default), "
                    f"mean completion {mine['completion_mean']['mean']:.1f} s (x{mine['completion_mean']['ratio_to_kube_default']:.3f})"
                )
    return path
