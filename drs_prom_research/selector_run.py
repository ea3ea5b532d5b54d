"""``drs-prom-research train-selector``: a heuristic-selector ``drs`` model (drs_prom_research.selector), in one command.

A research learner: none of its models was shipped (models/README.md, "Other learners tried").

1. **Label** generated training clusters (generator seeds 0..clusters-1): each arm schedules the
   cluster's workload once (same workload for every arm: paired), giving the episode's composite
   score; the default arm's run also records the smoothed cluster features the selector would see
   at a few decisions. Label of a sample = log(composite of arm / composite of the default arm).
2. **Fit** an ensemble of small MLPs (features -> one value per arm, MSE on the labels); the saved
   network is their exact mean (drs_prom_research.corrector.block_ensemble).
3. **Select** the checkpoint and the margin on held-out generator seeds by the mean composite ratio
   of the selector to the default arm, each run as a real policy; a margin of +inf (the default
   heuristic itself) is always a candidate. Named scenarios and evaluation clusters are never used.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.agent.cluster_context import CLUSTER_FEATURES, ClusterFeatures
from drs_prom.agent.numpy_policy import fold_standardisation
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.registry import configured_spec
from drs_prom.sim.env import scenario_spec, sim_policy, unclipped_env
from drs_prom.sim.generator import EVAL_CLUSTERS, EVAL_SEED_BASE, training_scenario
from drs_prom.training.guided_run import SELECTION_SEED_BASE
from drs_prom_research.corrector import block_ensemble
from drs_prom_research.selector import ARMS, DEFAULT_ARM, HeuristicSelector

MARGINS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.04, 0.08)
"""Margins tried at selection (predicted log-ratio gain); +inf (the default arm) is always kept as an option."""


@dataclass(frozen=True)
class ArmLabels:
    """Per training cluster: the features at a few decisions and every arm's episode composite."""

    features: np.ndarray  # (D, F)
    composite: np.ndarray  # (D, A): the cluster's composite per arm, repeated for each of its decisions
    cluster: np.ndarray  # (D,)

    def __len__(self) -> int:
        return len(self.cluster)

    @staticmethod
    def concat(parts: Sequence[ArmLabels]) -> ArmLabels:
        return ArmLabels(
            *(np.concatenate([getattr(p, f) for p in parts]) for f in ("features", "composite", "cluster"))
        )

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, features=self.features, composite=self.composite, cluster=self.cluster)

    @staticmethod
    def load(path: str | Path) -> ArmLabels:
        with np.load(path, allow_pickle=False) as d:
            return ArmLabels(d["features"], d["composite"], d["cluster"])


def label_cluster(seed: int, arms: Sequence[str] = tuple(ARMS), decisions: int = 10) -> ArmLabels:
    """Every arm on the training cluster ``seed``; features along the default arm's run at ``decisions`` decisions."""
    sc = training_scenario(seed)
    comp = np.array([unclipped_env(sc, seed).run(sim_policy(a, sc, seed), seed=seed).composite for a in arms])
    env = unclipped_env(sc, seed)
    policy = sim_policy(DEFAULT_ARM, sc, seed)
    window = policy.metric_window_seconds
    tracker = ClusterFeatures()
    ctx: DecisionContext | None = env.reset(seed)
    seen: list[np.ndarray] = []
    while ctx is not None:
        seen.append(tracker.update(ctx, window).copy())
        ctx, _, _ = env.step(choose(policy, ctx)[0])
    rng = np.random.default_rng([seed, 11])
    start = len(seen) // 10  # after a warm-up: the smoothed features need a few decisions
    picks = rng.choice(np.arange(start, len(seen)), size=min(decisions, len(seen) - start), replace=False)
    feats = np.stack([seen[i] for i in sorted(picks)])
    return ArmLabels(feats, np.tile(comp, (len(feats), 1)), np.full(len(feats), seed))


def _label(args: tuple[int, tuple[str, ...], int]) -> ArmLabels:
    return label_cluster(*args)


def label_clusters(
    seeds: Sequence[int],
    arms: Sequence[str] = tuple(ARMS),
    decisions: int = 10,
    workers: int = 2,
    progress: bool = True,
) -> ArmLabels:
    """label_cluster over ``seeds`` in ``workers`` processes (forked before TensorFlow is imported)."""
    from tqdm import tqdm

    jobs = [(int(s), tuple(arms), decisions) for s in seeds]
    bar = tqdm(total=len(jobs), desc="label clusters", unit="cluster", disable=not progress, leave=False)
    parts = []
    if workers <= 1:
        for job in jobs:
            parts.append(_label(job))
            bar.update(1)
    else:
        ctx = mp.get_context("fork" if os.name == "posix" else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for part in pool.map(_label, jobs, chunksize=1):
                parts.append(part)
                bar.update(1)
    bar.close()
    return ArmLabels.concat(parts)


@dataclass(frozen=True)
class SelectorConfig:
    members: int = 5
    hidden: tuple[int, ...] = (32, 32)
    epochs: int = 200
    batch: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-3
    checkpoints: tuple[int, ...] = (50, 100, 200)
    """Epochs at which the ensemble is run on the selection clusters (the learning curve)."""
    seed: int = 0


@dataclass
class SelectorFit:
    layers: list[tuple[np.ndarray, np.ndarray, str]]
    margin: float
    epoch: int
    selection: dict[str, Any]
    curve: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def log_ratios(labels: ArmLabels, arms: Sequence[str]) -> np.ndarray:
    """(D, A) log(composite of arm / composite of the default arm): the regression targets."""
    d = list(arms).index(DEFAULT_ARM)
    return np.log(labels.composite / labels.composite[:, d : d + 1])


def selection_ratio(
    make: Callable[[int], Any], seeds: Sequence[int], base: dict[int, float]
) -> tuple[float, dict[str, int]]:
    """Mean composite(policy) / composite(default arm) over held-out training clusters; arms used, by decisions."""
    ratios: list[float] = []
    used: dict[str, int] = {}
    for s in seeds:
        sc = training_scenario(s)
        if s not in base:
            base[s] = unclipped_env(sc, s).run(sim_policy(DEFAULT_ARM, sc, s), seed=s).composite
        policy = make(s)
        policy.metric_window_seconds = scenario_spec(sc).metric_window_seconds  # its arms' memory, as sim_policy
        arms_used: dict[str, int] = {}

        def count(_: Any, p: Any = policy, seen: dict[str, int] = arms_used) -> None:
            seen[p.last_arm] = seen.get(p.last_arm, 0) + 1

        ratios.append(unclipped_env(sc, s).run(policy, seed=s, on_step=count).composite / base[s])
        for a, c in arms_used.items():
            used[a] = used.get(a, 0) + c
    return float(np.mean(ratios)), used


def _selector(layers: list, arms: tuple[str, ...], margin: float, seed: int) -> HeuristicSelector:
    return HeuristicSelector(
        layers, arms, margin, seed=seed, metric_window_seconds=configured_spec().metric_window_seconds
    )


def fit_selector(
    labels: ArmLabels,
    cfg: SelectorConfig,
    selection_seeds: Sequence[int],
    arms: Sequence[str] = tuple(ARMS),
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> SelectorFit:
    """Train the ensemble, run checkpoints x margins on the selection clusters, keep the best (or the default arm)."""
    from drs_prom.agent.networks import configure_tf, export_dense, node_scorer

    t0 = time.monotonic()
    tf = configure_tf()
    import keras

    keras.utils.set_random_seed(cfg.seed)
    x = labels.features.astype(np.float32)
    mu, sd = x.mean(axis=0), np.where(x.std(axis=0) > 1e-6, x.std(axis=0), 1.0).astype(np.float32)
    xs = ((x - mu) / sd).astype(np.float32)
    y = log_ratios(labels, arms).astype(np.float32)
    rng = np.random.default_rng(cfg.seed)
    clusters = np.unique(labels.cluster)
    members = []
    for m in range(cfg.members):
        boot = rng.choice(clusters, size=len(clusters), replace=True)  # bootstrap whole clusters
        idx = np.concatenate([np.flatnonzero(labels.cluster == c) for c in boot])
        net = node_scorer(x.shape[1], cfg.hidden, cfg.seed * 1000 + m, outputs=len(arms))
        opt = keras.optimizers.AdamW(learning_rate=cfg.lr, weight_decay=cfg.weight_decay)

        @tf.function(reduce_retracing=True)
        def step(xb: Any, yb: Any, net: Any = net, opt: Any = opt) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(net(xb, training=True) - yb))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables))
            return loss

        members.append((idx, net, step))
    base: dict[int, float] = {}
    curve: list[dict[str, Any]] = []
    best: tuple[float, int, float, list, dict[str, int]] | None = None
    from tqdm import tqdm

    bar = tqdm(total=cfg.epochs, desc="fit selector", unit="epoch", disable=not progress, leave=False)
    for epoch in range(1, cfg.epochs + 1):
        losses = []
        for idx, _, step in members:
            order = rng.permutation(idx)
            for i in range(0, len(order), cfg.batch):
                b = order[i : i + cfg.batch]
                losses.append(float(step(xs[b], y[b])))
        bar.update(1)
        if epoch not in cfg.checkpoints:
            continue
        layers = fold_standardisation(block_ensemble([export_dense(net) for _, net, _ in members]), mu, sd)
        scores: dict[float, float] = {}
        used_by: dict[float, dict[str, int]] = {}
        for margin in MARGINS:
            make = partial(_selector, layers, tuple(arms), margin)
            scores[margin], used_by[margin] = selection_ratio(make, selection_seeds, base)
        point = {"epoch": epoch, "loss": round(float(np.mean(losses)), 6), "ratio_by_margin": scores}
        curve.append(point)
        echo(
            f"epoch {epoch}: loss {point['loss']}; held-out composite / {DEFAULT_ARM}: "
            + ", ".join(f"margin {m}: {r:.4f}" for m, r in scores.items())
        )
        m_best = min(scores, key=lambda m: scores[m])
        if best is None or scores[m_best] < best[0]:
            best = (scores[m_best], epoch, m_best, layers, used_by[m_best])
    bar.close()
    if best is None or best[0] >= 1.0:  # never ship something worse than the default arm on the held-out clusters
        layers = fold_standardisation(block_ensemble([export_dense(net) for _, net, _ in members]), mu, sd)
        best = (1.0, cfg.epochs, math.inf, layers, {DEFAULT_ARM: 0})
    selection = {
        "seeds": [int(s) for s in selection_seeds],
        "ratio_to_default_arm": round(best[0], 5),
        "epoch": best[1],
        "margin": None if math.isinf(best[2]) else best[2],
        "decisions_by_arm": best[4],
    }
    return SelectorFit(best[3], best[2], best[1], selection, curve, time.monotonic() - t0)


def plot_selection(fit: SelectorFit, path: str | Path, title: str) -> Path:
    """Learning curve: held-out composite / default arm per checkpoint, one line per margin; training loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    epochs = [p["epoch"] for p in fit.curve]
    for m in MARGINS:
        ax1.plot(epochs, [p["ratio_by_margin"][m] for p in fit.curve], marker="o", lw=1, label=f"margin {m}")
    ax1.axhline(1.0, color="grey", lw=1, ls="--", label=DEFAULT_ARM)
    ax1.set_ylabel("composite / default (held out)")
    ax1.set_title(title)
    ax1.legend(fontsize=7)
    ax2.plot(epochs, [p["loss"] for p in fit.curve], marker="o", lw=1, color="tab:red")
    ax2.set_ylabel("training MSE")
    ax2.set_xlabel("epoch")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def save_selector(
    fit: SelectorFit,
    out: str | Path,
    labels: ArmLabels,
    arms: Sequence[str],
    cfg: SelectorConfig,
    command: str,
    label_seconds: float,
) -> Path:
    """Write the network (.keras), its JSON (head, data, train/eval separation, curve) and the curve PNG."""
    from drs_prom.agent.networks import configure_tf, node_scorer
    from drs_prom.agent.persistence import base_metadata, save_model
    from drs_prom.config import Normalisation

    configure_tf()
    hidden = tuple(int(k.shape[1]) for k, _, _ in fit.layers[:-1])
    model = node_scorer(len(CLUSTER_FEATURES), hidden, outputs=len(arms))
    model.set_weights([w for k, b, _ in fit.layers for w in (k, b)])
    meta = base_metadata("drs", Normalisation())
    meta["head"] = HeuristicSelector(
        fit.layers, tuple(arms), fit.margin, metric_window_seconds=0.0
    ).head  # only its head
    seeds = sorted({int(c) for c in labels.cluster})
    meta["training"] = {
        "learner": "selector",
        "command": command,
        "config": asdict(cfg),
        "labelled_clusters": len(seeds),
        "samples": len(labels),
        "label_seconds": round(label_seconds, 1),
        "fit_seconds": round(fit.seconds, 1),
        "selection": fit.selection,
        "curve": [
            {**p, "ratio_by_margin": {str(m): round(r, 5) for m, r in p["ratio_by_margin"].items()}} for p in fit.curve
        ],
    }
    meta["data"] = {
        "trained_on": f"generated clusters, generator seeds {seeds[0]}..{seeds[-1]} (TRAIN_SEEDS)",
        "checkpoint_selection": f"generated clusters, generator seeds {min(fit.selection['seeds'])}.."
        f"{max(fit.selection['seeds'])} (TRAIN_SEEDS, disjoint from the labelled ones)",
        "never_used": "every packaged named scenario and the evaluation clusters "
        f"({len(EVAL_CLUSTERS)} at generator seeds {EVAL_SEED_BASE}+): evaluation only",
    }
    meta["benchmark"] = {}
    path = save_model(model, meta, out)
    plot_selection(fit, Path(out).with_suffix(".png"), f"drs: selector over {len(arms)} heuristics")
    return path


def run_selector_training(
    out: str | Path,
    clusters: int = 400,
    decisions: int = 10,
    selection_clusters: int = 40,
    cfg: SelectorConfig | None = None,
    arms: Sequence[str] = tuple(ARMS),
    workers: int = 2,
    labels_path: str | Path | None = None,
    progress: bool = True,
    command: str = "",
    echo: Callable[[str], None] = print,
) -> Path:
    """Label (or reuse ``labels_path`` if it exists), fit, select and save the selector."""
    cfg = cfg or SelectorConfig()
    t0 = time.monotonic()
    if labels_path and Path(labels_path).exists():
        labels = ArmLabels.load(labels_path)
        echo(f"reusing {len(labels)} labelled samples from {labels_path}")
    else:
        labels = label_clusters(range(clusters), arms, decisions, workers, progress)
        if labels_path:
            labels.save(labels_path)
    label_s = time.monotonic() - t0
    echo(f"labelled {len(np.unique(labels.cluster))} generated clusters in {label_s:.0f} s")
    selection = [SELECTION_SEED_BASE + i for i in range(selection_clusters)]
    fit = fit_selector(labels, cfg, selection, arms, progress, echo)
    path = save_selector(fit, out, labels, arms, cfg, command, label_s)
    echo(
        f"selected epoch {fit.epoch}, margin {fit.selection['margin']}: held-out composite "
        f"{fit.selection['ratio_to_default_arm']:.4f} x {DEFAULT_ARM}'s -> {path}"
    )
    return path
