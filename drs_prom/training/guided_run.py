"""``drs-prom train --learner guided``: the heuristic-guided per-node network (drs_prom.agent.guided).

1. **Label** (optional, ``label_arms``) generated training clusters (seeds below SELECTION_SEED_BASE): each listed
   heuristic schedules the cluster's workload once (paired); the cluster's *target* is the heuristic with the lowest
   composite when it beats the floor (the resident-aware teacher, capacity-balanced-resident) by more than
   ``switch_margin``, else the floor (small wins are seed noise).
2. **Demonstrations**: the target schedules the cluster again while every decision's input rows are recorded; the
   label of a decision is the set of nodes the target ranks first.
3. **Fit** (DQfD's supervised part): a large-margin loss makes the labelled node score at least ``margin`` above
   every other feasible node. Then **DAgger** rounds: the network itself schedules the training clusters, each visited
   state is labelled with the target's first choice, and the fit continues on all data (it learns to recover).
4. **Select** the checkpoint on held-out generator seeds (SELECTION_SEED_BASE and up) by the mean composite ratio to
   the floor, refusing any whose mean ratio to kube-default is above 1. Named scenarios and the evaluation clusters
   are never used. Every pod's usage is the estimate from the stored series (drs_prom.usage), as served.

Over 400 lines because labelling, demonstrations, the fit and the selection are the stages of one run, sharing its
config and its clusters.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from drs_prom.agent.guided import GUIDED_COLUMNS, GUIDES, N_GUIDED, TEACHER, GuidedPolicy, GuideScores, guided_columns
from drs_prom.agent.numpy_policy import fold_standardisation
from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.sim.env import scenario_spec, sim_policy, unclipped_env
from drs_prom.sim.generator import TRAINING_OWNER_PROBABILITY, GeneratorParams, training_scenario

FLOOR = TEACHER  # what every cluster imitates unless labelling finds a heuristic that beats it
SELECTION_SEED_BASE = 500_000
"""Held-out generator seeds for checkpoint selection (labelling and training use seeds below them)."""

SCALE_AND_CONTEXT: tuple[str, ...] = (
    *("load_", "recent_", "pod_", "after_", "dev_", "dstd_", "std_"),
    *("ctx_log_nodes", "ctx_cpu_", "ctx_mem_", "ctx_io_", "ctx_bottleneck_std", "ctx_requested", "ctx_request_gap"),
    *("ctx_feasible", "ctx_pod_", "ctx_stale", "ctx_log_arrival", "ctx_rate_trend"),
)
"""Frozen in the shipped run: the columns on the scenario's own scales and the context a packaged cluster can take
far outside the generated ones (cluster-50's arrival rate). With them free, the network copied capacity-balanced-
overload on the generated clusters and left it on cluster-50 (+90 % composite); frozen, it keeps the node-relative
loads, requests, the five heuristics' views and four context columns (bottleneck mean, hot and overloaded shares,
metric window)."""


@dataclass(frozen=True)
class GuidedConfig:
    """One training run; the defaults are those of the shipped models/drs-v7.keras."""

    clusters: int = 48
    """Training clusters (generator seeds 0..clusters-1)."""
    selection_clusters: int = 12
    """Held-out clusters for checkpoint selection (generator seeds SELECTION_SEED_BASE and up)."""
    switch_margin: float = 0.02
    """A cluster's target leaves the floor only for a heuristic that beats it by more than this."""
    decisions_per_cluster: int = 40
    hidden: tuple[int, ...] = (64, 64)
    margin: float = 0.5
    """Large-margin loss: the labelled node must score this much above every other feasible node."""
    lr: float = 1e-3
    batch: int = 64
    """Decisions per gradient step."""
    epochs: int = 8
    dagger_rounds: int = 0
    dagger_epochs: int = 4
    label_arms: tuple[str, ...] = ()
    """Heuristics run on every cluster to choose its target (each costs one episode per cluster); empty: every
    cluster imitates the floor. (FLOOR, "kube-default") on 60 clusters gave kube-default as the target on 2."""
    frozen: tuple[str, ...] = SCALE_AND_CONTEXT
    """Input column prefixes held at their training mean (in training and at inference): what the network may not use."""
    load: tuple[float, float] = (0.4, 0.9)
    """Bottleneck utilisation of the training and selection clusters (generator's ``load``; > 1: overloaded)."""
    metric_windows: tuple[float, ...] = (1.0, 5.0, 15.0, 30.0)
    """Metric lags (s) of the training and selection clusters."""
    owner_probability: float = TRAINING_OWNER_PROBABILITY
    """Share of the clusters' profiles run by several owners: what the usage estimator must learn from."""
    seed: int = 0
    workers: int = 2

    def generator(self) -> GeneratorParams | None:
        """The generator's ranges for this run; None where they are its defaults."""
        p = GeneratorParams(
            load=self.load, metric_windows=self.metric_windows, owner_probability=self.owner_probability
        )
        return None if p == GeneratorParams() else p


@dataclass
class Demos:
    """Ragged decisions: rows (R, F), and per row its decision id, feasibility and label (target's first choice)."""

    rows: np.ndarray
    decision: np.ndarray
    feasible: np.ndarray
    label: np.ndarray

    @staticmethod
    def concat(parts: Sequence[Demos]) -> Demos:
        offs, out = 0, []
        for p in parts:
            out.append(p.decision + offs)
            offs += int(p.decision.max()) + 1 if len(p.decision) else 0
        return Demos(
            np.concatenate([p.rows for p in parts]),
            np.concatenate(out),
            np.concatenate([p.feasible for p in parts]),
            np.concatenate([p.label for p in parts]),
        )

    @property
    def n_decisions(self) -> int:
        return int(self.decision.max()) + 1 if len(self.decision) else 0


def arm_composites(seed: int, arms: Sequence[str] = GUIDES, params: GeneratorParams | None = None) -> dict[str, float]:
    """Each of ``arms`` on training cluster ``seed``'s workload (paired): composite per heuristic."""
    sc = training_scenario(seed, params)
    return {a: unclipped_env(sc, seed).run(sim_policy(a, sc, seed), seed=seed).composite for a in arms}


def target_of(comp: dict[str, float], switch_margin: float) -> str:
    best = min(comp, key=lambda a: comp[a])
    return best if comp[best] < comp[FLOOR] * (1.0 - switch_margin) else FLOOR


def record_cluster(
    seed: int,
    target: str,
    layers: list | None = None,
    decisions: int = 60,
    rng_key: int = 0,
    params: GeneratorParams | None = None,
) -> tuple[Demos, float]:
    """Play cluster ``seed`` with the network (``layers``) or, without one, with ``target``; label each visited
    state with ``target``'s first choice there. Returns ``decisions`` sampled decisions and the composite."""
    sc = training_scenario(seed, params)
    env = unclipped_env(sc, seed)
    guides = GuideScores(scenario_spec(sc).metric_window_seconds)
    actor: Any = None
    if layers is None:
        actor = sim_policy(target, sc, seed)
    t_idx = GUIDES.index(target)
    rows, feas, labels = [], [], []
    ctx: DecisionContext | None = env.reset(seed)
    while ctx is not None:
        x, raw = guides.rows(ctx)
        feasible = np.asarray(ctx.feasible, bool)
        if layers is None:
            node = choose(actor, ctx)[0]
        else:
            from drs_prom.agent.numpy_policy import forward

            q = np.where(feasible, forward(layers, x)[:, 0], -np.inf)
            node = int(np.argmax(q)) if feasible.any() else -1
        if feasible.sum() >= 2:
            s = np.where(feasible, raw[t_idx], -np.inf)
            rows.append(x)
            feas.append(feasible)
            labels.append(feasible & (s >= s.max() - 1e-9))
        guides.bound(ctx, node)
        ctx, _, _ = env.step(node)
    composite = env.result("guided").composite
    rng = np.random.default_rng([seed, rng_key])
    keep = sorted(rng.choice(len(rows), size=min(decisions, len(rows)), replace=False)) if rows else []
    parts = [(rows[i], feas[i], labels[i], k) for k, i in enumerate(keep)]
    if not parts:
        z = np.zeros((0, N_GUIDED), np.float32)
        return Demos(z, np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool)), composite
    return (
        Demos(
            np.concatenate([p[0] for p in parts]),
            np.concatenate([np.full(len(p[0]), p[3]) for p in parts]),
            np.concatenate([p[1] for p in parts]),
            np.concatenate([p[2] for p in parts]),
        ),
        composite,
    )


def _pool_map(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int) -> list[Any]:
    if workers <= 1:
        return [fn(j) for j in jobs]
    ctx = mp.get_context("fork" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(fn, jobs, chunksize=1))


def _composites_job(args: tuple[int, tuple[str, ...], GeneratorParams | None]) -> dict[str, float]:
    return arm_composites(*args)


def _record_job(args: tuple[int, str, list | None, int, int, GeneratorParams | None]) -> tuple[Demos, float]:
    return record_cluster(*args)


def _policy_job(args: tuple[int, list, tuple[np.ndarray, np.ndarray], GeneratorParams | None]) -> float:
    seed, layers, input_range, params = args
    sc = training_scenario(seed, params)
    policy = GuidedPolicy(layers, scenario_spec(sc).metric_window_seconds, input_range=input_range)
    return unclipped_env(sc, seed).run(policy, seed=seed).composite


@dataclass
class GuidedFit:
    layers: list
    selected: dict[str, Any]
    input_range: tuple[np.ndarray, np.ndarray] | None = None
    curve: list[dict[str, Any]] = field(default_factory=list)
    targets: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)


class _Learner:
    """The Keras network and its large-margin step over ragged decisions (TensorFlow only here)."""

    def __init__(self, cfg: GuidedConfig, mu: np.ndarray, sd: np.ndarray) -> None:
        from drs_prom.agent.networks import configure_tf, node_scorer

        self.tf = configure_tf()
        import keras

        keras.utils.set_random_seed(cfg.seed)
        self.cfg = cfg
        self.mu, self.sd = mu.astype(np.float32), sd.astype(np.float32)
        self.net = node_scorer(N_GUIDED, cfg.hidden, seed=cfg.seed)
        self.opt = keras.optimizers.Adam(cfg.lr)
        tf = self.tf
        margin = float(cfg.margin)

        @tf.function(reduce_retracing=True)
        def step(x: Any, seg: Any, feas: Any, lab: Any, nseg: Any) -> Any:
            with tf.GradientTape() as tape:
                q = self.net(x, training=True)[:, 0]
                neg = tf.constant(-1e9)
                other = tf.where(feas & ~lab, q + margin, neg)
                good = tf.where(lab, q, neg)
                loss = tf.reduce_mean(
                    tf.nn.relu(
                        tf.math.unsorted_segment_max(other, seg, nseg) - tf.math.unsorted_segment_max(good, seg, nseg)
                    )
                )
                loss += 1e-4 * tf.reduce_mean(tf.square(q))
            grads = tape.gradient(loss, self.net.trainable_variables)
            self.opt.apply_gradients(zip(grads, self.net.trainable_variables, strict=True))
            return loss

        self._step = step

    def epoch(self, data: Demos, rng: np.random.Generator) -> float:
        order = rng.permutation(data.n_decisions)
        starts = np.searchsorted(data.decision, np.arange(data.n_decisions + 1))
        losses = []
        for b in range(0, len(order), self.cfg.batch):
            ids = order[b : b + self.cfg.batch]
            idx = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in ids])
            seg = np.repeat(np.arange(len(ids)), [starts[i + 1] - starts[i] for i in ids])
            x = (data.rows[idx] - self.mu) / self.sd
            losses.append(
                float(self._step(x, seg.astype(np.int32), data.feasible[idx], data.label[idx], np.int32(len(ids))))
            )
        return float(np.mean(losses))

    def layers(self) -> list:
        from drs_prom.agent.networks import export_dense

        return fold_standardisation(export_dense(self.net), self.mu.astype(np.float64), self.sd.astype(np.float64))


def fit_guided(cfg: GuidedConfig, echo: Callable[[str], None] = print) -> GuidedFit:
    """Label, record, fit, DAgger, select: the whole training run (see the module docstring)."""
    t0 = time.monotonic()
    train_seeds = list(range(cfg.clusters))
    sel_seeds = [SELECTION_SEED_BASE + k for k in range(cfg.selection_clusters)]
    gen = cfg.generator()
    if cfg.label_arms:
        comps = _pool_map(_composites_job, [(s, cfg.label_arms, gen) for s in train_seeds], cfg.workers)
        targets = {s: target_of(c, cfg.switch_margin) for s, c in zip(train_seeds, comps, strict=True)}
    else:  # no labelling: every cluster imitates the floor
        targets = dict.fromkeys(train_seeds, FLOOR)
    counts: dict[str, int] = {}
    for t in targets.values():
        counts[t] = counts.get(t, 0) + 1
    echo(f"labelled {len(train_seeds)} clusters in {time.monotonic() - t0:.0f} s; targets {counts}")
    sel_comps = _pool_map(_composites_job, [(s, (FLOOR, "kube-default"), gen) for s in sel_seeds], cfg.workers)
    sel_floor = np.array([c[FLOOR] for c in sel_comps])
    sel_kd = np.array([c["kube-default"] for c in sel_comps])
    echo(f"selection clusters: kube-default {np.mean(sel_kd / sel_floor):.4f}x {FLOOR}")
    demo_jobs = [(s, targets[s], None, cfg.decisions_per_cluster, 0, gen) for s in train_seeds]
    data = Demos.concat([d for d, _ in _pool_map(_record_job, demo_jobs, cfg.workers)])
    echo(f"demonstrations: {data.n_decisions} decisions, {len(data.rows)} rows ({time.monotonic() - t0:.0f} s)")
    lo, hi = data.rows.min(axis=0), data.rows.max(axis=0)
    mean = data.rows.mean(axis=0)
    for i, col in enumerate(GUIDED_COLUMNS):
        if col.startswith(tuple(cfg.frozen)) and cfg.frozen:
            lo[i] = hi[i] = mean[i]
    input_range = (lo.astype(np.float32), hi.astype(np.float32))
    data.rows = np.clip(data.rows, input_range[0], input_range[1])
    mu = data.rows.mean(axis=0)
    sd = data.rows.std(axis=0) + 1e-3
    learner = _Learner(cfg, mu, sd)
    rng = np.random.default_rng(cfg.seed)
    curve: list[dict[str, Any]] = []
    best: tuple[float, dict[str, Any], list] | None = None
    kd_bar = max(1.0, float(np.mean(sel_floor / sel_kd)))  # kube-default, or the floor where the floor is above it

    def evaluate(stage: str, loss: float) -> None:
        nonlocal best
        layers = learner.layers()
        comp = np.array(_pool_map(_policy_job, [(s, layers, input_range, gen) for s in sel_seeds], cfg.workers))
        r_floor, r_kd = float(np.mean(comp / sel_floor)), float(np.mean(comp / sel_kd))
        point = {
            "stage": stage,
            "loss": round(loss, 4),
            "ratio_to_floor": round(r_floor, 4),
            "ratio_to_kube_default": round(r_kd, 4),
            "seconds": round(time.monotonic() - t0, 1),
        }
        curve.append(point)
        echo(str(point))
        key = r_floor if r_kd <= kd_bar else 10.0 + r_kd  # never worse than kube-default first, then near the floor
        if best is None or key < best[0]:
            best = (key, point, layers)

    loss = 0.0
    for ep in range(cfg.epochs):
        loss = learner.epoch(data, rng)
        echo(f"imitation epoch {ep + 1}: loss {loss:.4f}")
    evaluate("imitation", loss)
    for rnd in range(cfg.dagger_rounds):
        layers = learner.layers()
        jobs = [(s, targets[s], layers, cfg.decisions_per_cluster // 2, rnd + 1, gen) for s in train_seeds]
        out = _pool_map(_record_job, jobs, cfg.workers)
        data = Demos.concat([data, *[d for d, _ in out]])
        for _ in range(cfg.dagger_epochs):
            loss = learner.epoch(data, rng)
        echo(f"dagger round {rnd + 1}: {data.n_decisions} decisions, loss {loss:.4f}")
        evaluate(f"dagger-{rnd + 1}", loss)
    assert best is not None  # evaluate ran at least once
    return GuidedFit(
        layers=best[2],
        selected=best[1],
        input_range=input_range,
        curve=curve,
        targets=counts,
        seconds=time.monotonic() - t0,
        config=asdict(cfg),
    )


def save_guided(fit: GuidedFit, out: str | Path, command: str = "", guides: tuple[str, ...] = GUIDES) -> Path:
    """Write ``out`` (.keras: Dense chain, standardisation folded in) + JSON + curve; ``guides``: its inputs' guide set."""
    from drs_prom.agent.networks import configure_tf
    from drs_prom.agent.persistence import base_metadata, save_model
    from drs_prom.config import Normalisation
    from drs_prom.training.curves import plot_guided

    configure_tf()
    import keras

    inputs = keras.Input(shape=(len(guided_columns(guides)),), name="candidate")
    x = inputs
    for i, (k, b, act) in enumerate(fit.layers):
        name = "q" if i == len(fit.layers) - 1 else f"hidden_{i}"
        layer = keras.layers.Dense(k.shape[1], activation=None if act == "linear" else act, name=name)
        x = layer(x)
        layer.set_weights([k, b])
    model = keras.Model(inputs, x, name="drs_guided")
    meta = base_metadata("drs", Normalisation())
    meta["head"] = GuidedPolicy(fit.layers, 0.0, input_range=fit.input_range, guides=guides).head  # window-free
    meta["training"] = {
        "learner": "guided",
        "command": command,
        "seconds": round(fit.seconds, 1),
        "config": fit.config,
        "targets": fit.targets,
        "curve": fit.curve,
        "selected": fit.selected,
    }
    meta["data"] = {
        "train": f"generator seeds 0..{fit.config['clusters'] - 1}, load {fit.config.get('load', GuidedConfig.load)}, "
        f"metric lags {fit.config.get('metric_windows', GuidedConfig.metric_windows)} s",
        "selection": f"generator seeds {SELECTION_SEED_BASE}..{SELECTION_SEED_BASE + fit.config['selection_clusters'] - 1}",
        "never": "packaged scenarios and the evaluation clusters (eval-*, shift-*)",
    }
    path = save_model(model, meta, out)
    plot_guided(fit.curve, Path(out).with_suffix(".png"))
    return path


def run_guided_training(
    out: str | Path, cfg: GuidedConfig, command: str = "", echo: Callable[[str], None] = print
) -> Path:
    """``drs-prom train --learner guided``: fit, select and save; one line per stage through ``echo``."""
    fit = fit_guided(cfg, echo=echo)
    path = save_guided(fit, out, command=command)
    echo(f"trained drs (heuristic-guided) in {fit.seconds:.0f} s -> {path}; selected {fit.selected}")
    return path
