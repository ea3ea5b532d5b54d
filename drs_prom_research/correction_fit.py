"""Fit, select and save the top-k correction (drs_prom_research.corrector) from rollout-labelled decisions.

- **Fit**: each ensemble member is a per-candidate network trained so that the *difference*
  of its outputs between a candidate and the heuristic's own choice matches the labelled
  advantage (composite difference x TARGET_SCALE, Huber loss): only differences decide, so
  the network never has to predict how much of the episode is left. Members differ in seed
  and bootstrap sample; the saved network is their exact mean (block_ensemble), because
  single seeds swing widely.
- **Select**: the checkpoint and the margin are chosen on held-out *training-distribution*
  clusters (generator seeds disjoint from the labelled ones), by the mean ratio of the
  composite score to the base heuristic's on the same workloads. A margin of +inf (the
  heuristic itself) is always a candidate, so selection can only keep or improve on the
  heuristic on those clusters. Named scenarios and the evaluation clusters are never used.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from drs_prom.agent.networks import configure_tf, export_dense, node_scorer
from drs_prom.agent.numpy_policy import Layers
from drs_prom.sim.env import fit_to_scenario, sim_policy, unclipped_env
from drs_prom.sim.generator import training_scenario
from drs_prom_research.corrector import TARGET_SCALE, TopKCorrection, block_ensemble
from drs_prom_research.playout_targets import Samples

MARGINS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, float("inf"))
"""Margins tried at selection (network units: composite difference x 100); inf = the base heuristic."""


@dataclass(frozen=True)
class FitConfig:
    members: int = 3
    hidden: tuple[int, ...] = (64, 64)
    epochs: int = 60
    batch: int = 128
    lr: float = 1e-3
    huber_delta: float = 1.0
    weight_decay: float = 1e-4
    checkpoints: tuple[int, ...] = (10, 20, 40, 60)
    """Epochs at which the ensemble is scored on the selection clusters (the learning curve)."""
    seed: int = 0


@dataclass
class FitResult:
    layers: list[tuple[np.ndarray, np.ndarray, str]]
    margin: float
    epoch: int
    selection: dict[str, Any]
    curve: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def advantages(samples: Samples) -> np.ndarray:
    """(D, k) labels: how much lower the composite is than with the heuristic's choice, x TARGET_SCALE."""
    cost = np.where(samples.mask, samples.cost, np.nan)
    return np.nan_to_num((cost[:, :1] - cost) * TARGET_SCALE, nan=0.0)


def _standardise(samples: Samples) -> tuple[np.ndarray, np.ndarray]:
    rows = samples.rows[samples.mask]
    mu = rows.mean(axis=0)
    sd = rows.std(axis=0)
    return mu.astype(np.float32), np.where(sd > 1e-6, sd, 1.0).astype(np.float32)


def fold_standardisation(layers: Layers, mu: np.ndarray, sd: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """First layer rewritten to take raw rows: W (x - mu) / sd + b = (W / sd) x + (b - (mu / sd) W)."""
    out = [(np.asarray(k), np.asarray(b), a) for k, b, a in layers]
    k0, b0, a0 = out[0]
    k = k0 / sd[:, None]
    out[0] = (k.astype(np.float32), (b0 - (mu / sd) @ k0).astype(np.float32), a0)
    return out


def _member_trainer(n_inputs: int, cfg: FitConfig, seed: int) -> tuple[Any, Callable[..., float]]:
    tf = configure_tf()
    import keras

    net = node_scorer(n_inputs, cfg.hidden, seed)
    opt = keras.optimizers.AdamW(learning_rate=cfg.lr, weight_decay=cfg.weight_decay, global_clipnorm=10.0)
    huber = keras.losses.Huber(delta=cfg.huber_delta, reduction="none")

    @tf.function(reduce_retracing=True)
    def step(rows: Any, mask: Any, adv: Any) -> Any:
        b = tf.shape(rows)[0]
        k = tf.shape(rows)[1]
        with tf.GradientTape() as tape:
            pred = tf.reshape(net(tf.reshape(rows, (-1, n_inputs)), training=True)[:, 0], (b, k))
            diff = pred[:, 1:] - pred[:, :1]
            w = tf.cast(mask[:, 1:], tf.float32)
            per = huber(adv[:, 1:, None], diff[:, :, None]) * w
            loss = tf.reduce_sum(per) / tf.maximum(tf.reduce_sum(w), 1.0)
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))
        return loss

    def run(rows: np.ndarray, mask: np.ndarray, adv: np.ndarray) -> float:
        return float(step(rows, mask, adv))

    return net, run


def composite_ratio(
    policy_factory: Callable[[], Any], base: str, seeds: Sequence[int], base_scores: dict[int, float] | None = None
) -> tuple[float, dict[int, float]]:
    """Mean over ``seeds`` (training clusters) of composite(policy) / composite(base) on the same workload."""
    ratios = []
    base_scores = dict(base_scores or {})
    for s in seeds:
        sc = training_scenario(s)
        if s not in base_scores:
            base_scores[s] = unclipped_env(sc, s).run(sim_policy(base, sc, s), seed=s).composite
        mine = unclipped_env(sc, s).run(fit_to_scenario(policy_factory(), sc), seed=s).composite
        ratios.append(mine / base_scores[s])
    return float(np.mean(ratios)), base_scores


def fit(
    samples: Samples,
    cfg: FitConfig,
    selection_seeds: Sequence[int],
    base: str = "capacity-balanced-overload",
    k: int = 3,
    progress: bool = True,
    echo: Callable[[str], None] = print,
) -> FitResult:
    """Train the ensemble, score checkpoints x margins on the selection clusters, keep the best."""
    t0 = time.monotonic()
    configure_tf()
    import keras

    keras.utils.set_random_seed(cfg.seed)
    mu, sd = _standardise(samples)
    rows = ((samples.rows - mu) / sd * samples.mask[..., None]).astype(np.float32)
    adv = advantages(samples).astype(np.float32)
    mask = samples.mask
    n_inputs = rows.shape[2]
    rng = np.random.default_rng(cfg.seed)
    members = []
    for m in range(cfg.members):
        idx = rng.integers(0, len(samples), size=len(samples))  # bootstrap
        members.append((idx, *_member_trainer(n_inputs, cfg, cfg.seed * 1000 + m)))
    base_cache: dict[int, float] = {}
    curve: list[dict[str, Any]] = []
    best: tuple[float, int, float, list[tuple[np.ndarray, np.ndarray, str]]] | None = None
    from tqdm import tqdm

    bar = tqdm(total=cfg.epochs, desc="fit correction", unit="epoch", disable=not progress, leave=False)
    for epoch in range(1, cfg.epochs + 1):
        losses = []
        for idx, _, step in members:
            order = rng.permutation(idx)
            for i in range(0, len(order), cfg.batch):
                b = order[i : i + cfg.batch]
                losses.append(step(rows[b], mask[b], adv[b]))
        bar.update(1)
        bar.set_postfix(loss=f"{np.mean(losses):.4f}")
        if epoch not in cfg.checkpoints:
            continue
        layers = fold_standardisation(block_ensemble([export_dense(net) for _, net, _ in members]), mu, sd)
        scores = {}
        for margin in MARGINS[:-1]:
            # fit_to_scenario (in composite_ratio) gives its memory the scenario's window
            make = partial(TopKCorrection, layers, base, k, margin, metric_window_seconds=0.0)
            ratio, base_cache = composite_ratio(make, base, selection_seeds, base_cache)
            scores[margin] = ratio
        point = {"epoch": epoch, "loss": round(float(np.mean(losses)), 5), "ratio_by_margin": scores}
        curve.append(point)
        m_best = min(scores, key=lambda m: scores[m])
        echo(
            f"epoch {epoch}: loss {point['loss']}, held-out composite / base: "
            + ", ".join(f"m={m}: {r:.4f}" for m, r in scores.items())
        )
        if best is None or scores[m_best] < best[0]:
            best = (scores[m_best], epoch, m_best, layers)
    bar.close()
    if best is None or best[0] >= 1.0:  # never worse than the heuristic on the selection clusters
        layers = fold_standardisation(block_ensemble([export_dense(net) for _, net, _ in members]), mu, sd)
        best = (1.0, cfg.epochs, float("inf"), layers)
    selection = {
        "seeds": [int(s) for s in selection_seeds],
        "ratio_to_base": round(best[0], 5),
        "epoch": best[1],
        "margin": best[2],
        "base": base,
    }
    return FitResult(best[3], best[2], best[1], selection, curve, time.monotonic() - t0)
