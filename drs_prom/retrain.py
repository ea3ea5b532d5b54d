"""Retraining from what the cluster really did: journal + Prometheus history -> a gated new model.

``run_once`` is the whole job, top to bottom:

1. read the journal from the saved cursor (decisions whose reward has settled);
2. ask Prometheus (``query_range``) for the node features over that span and read them
   at each decision time and after its settle delay;
3. rebuild (state, action, reward, next state) transitions; rows with bad data (gaps,
   stale or vanished nodes, no settled reward, an unknown journal schema) are skipped and
   counted, never fatal; node requests/allocatable come from the journal (schema 2),
   and schema-1 rows, which lack them, are used with Prometheus capacity and zero
   requests and counted as approximated (``no_node_info``);
4. train a copy of the current model on the older transitions (plus simulator replay);
5. gate: candidate vs current on the newest, held-out transitions and on a short seeded
   simulator benchmark; promote (atomic pointer swap in the model store) only if the
   candidate is not worse by ``gate_margin``.

The APScheduler wrapper lives in ``drs_prom.retrain_job``; it never lets an exception
out, so a Prometheus outage during retraining cannot touch scheduling.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Protocol

import numpy as np
import pandas as pd

from drs_prom.config import Settings
from drs_prom.features import FEATURES, N_FEATURES
from drs_prom.journal import NODE_KEYS, Decision, Journal
from drs_prom.model_store import ModelStore
from drs_prom.policy import DecisionContext
from drs_prom.state import pod_matrix, scales
from drs_prom.types import NodeInfo, PodRequest

log = logging.getLogger(__name__)

# -- inputs ------------------------------------------------------------------------------


@dataclass
class NodeHistory:
    """Node features over time, raw units, on one time grid.

    ``values[node]``: (T, 6) in FEATURES order, NaN where the node had no (fresh) data.
    ``cores``/``mem_bytes``: capacities used to turn pod demand into node fractions.
    """

    times: np.ndarray
    values: dict[str, np.ndarray]
    cores: dict[str, float] = field(default_factory=dict)
    mem_bytes: dict[str, float] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return float(self.times[-1]) if len(self.times) else float("-inf")


class HistorySource(Protocol):
    """What retraining needs from Prometheus (drs_prom.prometheus.PrometheusSource)."""

    def history(self, start: float, end: float, step: float) -> Any: ...


def reward_delay(settings: Settings) -> float:
    """Seconds after a decision at which its reward is read.

    The rate() window must lie entirely after the settle delay, otherwise the "after"
    reading still averages load from before the pod arrived.
    """
    return settings.scheduler.settle_seconds + settings.prometheus.window_seconds


# -- journal -----------------------------------------------------------------------------


def load_decisions(journal: Journal, since: float, until: float, limit: int) -> tuple[list[Decision], Counter]:
    """Decisions in [since, until) that can be used, and counts of the rows left out."""
    skipped: Counter = Counter()
    out: list[Decision] = []
    for row in journal.since(since, until):
        if not isinstance(row, Decision):
            skipped["old_schema"] += 1
            continue
        if row.outcome != "bound":
            skipped["not_bound"] += 1
            continue
        n = len(row.candidates)
        if (
            row.chosen not in row.candidates
            or len(row.feasible) != n
            or len(row.pod_features) != N_FEATURES
            or not all(np.isfinite(v) for v in row.pod_features)
            or (row.nodes is not None and not _nodes_ok(row.nodes, n))
        ):
            skipped["bad_row"] += 1
            continue
        out.append(row)
        if len(out) >= limit:
            break
    return out, skipped


def _nodes_ok(nodes: Any, n: int) -> bool:
    """A journalled ``nodes`` list: one entry per candidate with every NODE_KEYS integer."""
    return (
        isinstance(nodes, list)
        and len(nodes) == n
        and all(
            isinstance(e, dict) and all(isinstance(e.get(k), int) and not isinstance(e.get(k), bool) for k in NODE_KEYS)
            for e in nodes
        )
    )


# -- transitions -------------------------------------------------------------------------


@dataclass
class Transition:
    """One placement as the learner sees it.

    ``ctx``: the state at decision time; ``action``: index of the chosen node in
    ``ctx.nodes``; ``load_after``: normalised load once it settled; ``next_ctx``: the
    following decision's state (None: nothing to bootstrap from, i.e. done);
    ``node_info``: False when the journal row had no node requests (schema 1) and
    ``ctx.nodes`` was approximated from Prometheus capacity with zero requests.
    """

    decision_id: int | None
    ts: float
    ctx: DecisionContext
    action: int
    reward: float
    load_after: np.ndarray
    next_ctx: DecisionContext | None = None
    node_info: bool = True


class _Lookup:
    """Vectorised reads of the history grid per node (a row is valid when all six features are)."""

    def __init__(self, history: NodeHistory, max_age: float) -> None:
        self.h = history
        self.max_age = max_age
        self.last_valid: dict[str, np.ndarray] = {}
        self.next_valid: dict[str, np.ndarray] = {}
        n = len(history.times)
        idx = np.arange(n)
        for node, vals in history.values.items():
            valid = np.isfinite(vals).all(axis=1)
            self.last_valid[node] = np.maximum.accumulate(np.where(valid, idx, -1)) if n else idx
            self.next_valid[node] = np.flip(np.minimum.accumulate(np.flip(np.where(valid, idx, n)))) if n else idx

    def before(self, node: str, t: float) -> tuple[np.ndarray | None, str | None]:
        """Newest reading at or before ``t`` no older than max_age: (values, None) or (None, reason).

        reason: ``node_gone`` (no series, or none from ``t`` on), ``gap`` (data before and
        after but not near ``t``), ``stale`` (nothing before ``t``).
        """
        lv = self.last_valid.get(node)
        if lv is None or len(lv) == 0:
            return None, "node_gone"
        k = int(np.searchsorted(self.h.times, t, side="right")) - 1
        j = int(lv[k]) if k >= 0 else -1
        if j >= 0 and t - self.h.times[j] <= self.max_age:
            return self.h.values[node][j], None
        later = k + 1 < len(lv) and int(self.next_valid[node][k + 1]) < len(lv)
        if not later:
            return None, "node_gone"
        return None, "gap" if j >= 0 else "stale"

    def after(self, node: str, t: float) -> np.ndarray | None:
        """First reading at or after ``t`` (so its rate window starts after the settle time), within max_age."""
        nv = self.next_valid.get(node)
        if nv is None or len(nv) == 0:
            return None
        k = int(np.searchsorted(self.h.times, t - 1e-6, side="left"))
        if k >= len(nv):
            return None
        j = int(nv[k])
        if j >= len(nv) or self.h.times[j] - t > self.max_age:
            return None
        return self.h.values[node][j]


def _normalise(raw: np.ndarray, settings: Settings) -> np.ndarray:
    """state.node_matrix on an already ordered (n, 6) array (no DataFrame per decision: 10x faster)."""
    values = np.asarray(raw, dtype=np.float64) / scales(settings.normalisation)
    if settings.normalisation.clip:
        values = np.clip(values, 0.0, 1.0)
    return values.astype(np.float32)


def decision_nodes(d: Decision, history: NodeHistory) -> list[NodeInfo]:
    """The candidates' NodeInfo as the scheduler saw them.

    Journal schema 2 recorded requests and allocatable per candidate: used exactly.
    Older rows did not: allocatable is Prometheus capacity (cores, MemTotal) and
    requests are zero, which skews the request columns of the model input.
    """
    if d.nodes is not None:
        return [NodeInfo(name=n, **{k: int(e[k]) for k in NODE_KEYS}) for n, e in zip(d.candidates, d.nodes)]
    out = []
    for n in d.candidates:
        c, m = history.cores.get(n, float("nan")), history.mem_bytes.get(n, float("nan"))
        out.append(
            NodeInfo(
                name=n,
                allocatable_cpu_m=int(c * 1000) if np.isfinite(c) else 0,
                allocatable_mem_bytes=int(m) if np.isfinite(m) else 0,
            )
        )
    return out


def _context(d: Decision, raw: np.ndarray, history: NodeHistory, settings: Settings) -> DecisionContext:
    norm = settings.normalisation
    load = _normalise(raw, settings)
    cores = [history.cores.get(n, float("nan")) for n in d.candidates]
    mem = [history.mem_bytes.get(n, float("nan")) for n in d.candidates]
    pod_load = pod_matrix(d.pod_features, cores, mem, norm)
    nodes = decision_nodes(d, history)
    pod = PodRequest(
        name=d.pod_name,
        namespace=d.namespace,
        uid=d.pod_uid,
        cpu_m=int(d.pod_cpu_m or 0),
        mem_bytes=int(d.pod_mem_bytes or 0),
        demand=tuple(d.pod_features),  # type: ignore[arg-type]
    )
    return DecisionContext(
        pod=pod, nodes=nodes, feasible=np.asarray(d.feasible, bool), load=load, pod_load=pod_load, now=d.ts
    )


def transition_reward(before: np.ndarray, after: np.ndarray, settings: Settings) -> float:
    """drs_prom.reward on measured loads; slowdown is not observable from node metrics (1.0)."""
    from drs_prom.reward import reward

    utilisation = float(np.mean(after[:, :2])) if after.size else 0.0  # rows were validated: no NaN
    return reward(before, after, utilisation, 1.0, settings.reward)


def rebuild_transitions(
    decisions: Sequence[Decision],
    history: NodeHistory,
    settings: Settings,
    *,
    episode_gap_seconds: float | None = None,
) -> tuple[list[Transition], Counter, float | None]:
    """Pure: decisions + history -> transitions, skip counts, and the settled cursor.

    The cursor is the newest decision time up to which every decision was settled
    (used or skipped for good); decisions after it are read again next run.
    ``episode_gap_seconds``: decisions further apart than this are not chained as
    (state, next state); default 10x the reward delay.
    """
    delay = reward_delay(settings)
    gap = episode_gap_seconds if episode_gap_seconds is not None else 10 * delay
    lookup = _Lookup(history, settings.prometheus.max_sample_age_seconds)
    skipped: Counter = Counter()
    out: list[Transition] = []
    cursor: float | None = None
    unsettled = False
    contexts: list[DecisionContext | None] = []
    for d in decisions:
        contexts.append(None)
        if d.ts + delay + lookup.max_age > history.end:
            skipped["no_settled_reward"] += 1  # may still settle: read again next run
            unsettled = True
            continue
        if not unsettled:
            cursor = d.ts
        before, after, why = [], [], None
        for node in d.candidates:
            v, why = lookup.before(node, d.ts)
            if v is None:
                break
            w = lookup.after(node, d.ts + delay)
            if w is None:
                why = "no_settled_reward"
                break
            before.append(v)
            after.append(w)
        if why is not None:
            skipped[why] += 1
            continue
        if not all(
            np.isfinite(history.cores.get(n, np.nan)) and np.isfinite(history.mem_bytes.get(n, np.nan))
            for n in d.candidates
        ):
            skipped["no_capacity"] += 1
            continue
        ctx = _context(d, np.asarray(before), history, settings)
        load_after = _normalise(np.asarray(after), settings)
        contexts[-1] = ctx
        out.append(
            Transition(
                decision_id=d.id,
                ts=d.ts,
                ctx=ctx,
                action=d.candidates.index(d.chosen),
                reward=transition_reward(ctx.load, load_after, settings),
                load_after=load_after,
                node_info=d.nodes is not None,
            )
        )
    # chain each transition to the next decision's state when it followed closely;
    # a skipped next decision leaves nothing to bootstrap from (done)
    position = {id(c): i for i, c in enumerate(contexts) if c is not None}
    for t in out:
        i = position[id(t.ctx)]
        nxt = contexts[i + 1] if i + 1 < len(contexts) else None
        if nxt is not None and nxt.now - t.ts <= gap:
            t.next_ctx = nxt
    return out, skipped, cursor


# -- gate --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateVerdict:
    promote: bool
    reason: str


def gate(scores: Mapping[str, Mapping[str, float]], margin: float) -> GateVerdict:
    """Promote only if the candidate is not worse than current by more than ``margin`` (relative).

    ``scores[benchmark] = {"candidate": x, "current": y}``, higher is better on every
    benchmark; a benchmark without a current score (first model) passes.
    """
    for bench, s in scores.items():
        cand, cur = s.get("candidate"), s.get("current")
        if cur is None:
            continue
        if cand is None or not np.isfinite(cand):
            return GateVerdict(False, f"{bench}: candidate has no score")
        allowed = cur - margin * abs(cur) - 1e-12
        if cand < allowed:
            return GateVerdict(False, f"{bench}: candidate {cand:.5g} < current {cur:.5g} - {margin:.0%}")
    if all(s.get("current") is None for s in scores.values()):
        return GateVerdict(True, "no current model")
    return GateVerdict(True, "not worse than current within margin")


# -- metrics -----------------------------------------------------------------------------


class RetrainMetrics:
    """The job's Prometheus metrics; one instance per registry."""

    _by_registry: dict[int, RetrainMetrics] = {}

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter as C
        from prometheus_client import Gauge as G

        self.runs = C("drs_retrain_runs", "Retraining runs by outcome.", ["result"], registry=registry)
        self.last_success = G(
            "drs_retrain_last_success_timestamp_seconds",
            "End of the last run that trained a candidate.",
            registry=registry,
        )
        self.transitions = G(
            "drs_retrain_transitions_used", "Transitions rebuilt and used by the last run.", registry=registry
        )
        self.skipped = C(
            "drs_retrain_decisions_skipped",
            "Journal rows left out of retraining, by reason.",
            ["reason"],
            registry=registry,
        )
        self.approximated = C(
            "drs_retrain_transitions_approximated",
            "Transitions used with part of their input approximated, by reason (no_node_info: journal schema 1, zero requests).",
            ["reason"],
            registry=registry,
        )
        self.eval = G(
            "drs_retrain_eval_score",
            "Gate scores of the last run (higher is better).",
            ["benchmark", "model"],
            registry=registry,
        )
        self.duration = G("drs_retrain_last_duration_seconds", "Wall time of the last run.", registry=registry)
        self.current = G("drs_retrain_current_version", "Number of the promoted model version.", registry=registry)
        for r in ("promoted", "rejected", "insufficient_data", "error"):
            self.runs.labels(r)
        self.approximated.labels("no_node_info")

    @classmethod
    def get(cls, registry: Any = None) -> RetrainMetrics:
        if registry is None:
            from prometheus_client import REGISTRY

            registry = REGISTRY
        key = id(registry)
        if key not in cls._by_registry:
            cls._by_registry[key] = cls(registry)
        return cls._by_registry[key]


# -- result ------------------------------------------------------------------------------


@dataclass
class RetrainResult:
    result: str  # promoted | rejected | insufficient_data | error
    reason: str = ""
    decisions: int = 0
    transitions: int = 0
    trained_on: int = 0
    held_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    approximated: dict[str, int] = field(default_factory=dict)  # used, but inexact: no_node_info = schema-1 rows
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    version: str | None = None
    previous: str | None = None
    cursor: float | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        sk = ", ".join(f"{k}={v}" for k, v in sorted(self.skipped.items())) or "none"
        ap = ", ".join(f"{k}={v}" for k, v in sorted(self.approximated.items()) if v) or "none"
        sc = "; ".join(f"{b}: " + ", ".join(f"{m}={v:.4g}" for m, v in s.items()) for b, s in self.scores.items())
        return (
            f"retrain {self.result}: {self.reason}; decisions={self.decisions} transitions={self.transitions} "
            f"(train {self.trained_on}, held out {self.held_out}); skipped: {sk}; approximated: {ap}; scores: {sc or '-'}; "
            f"version={self.version} previous={self.previous}"
        )


def record(metrics: RetrainMetrics, res: RetrainResult, elapsed: float) -> None:
    metrics.runs.labels(res.result).inc()
    metrics.duration.set(elapsed)
    for reason, n in res.skipped.items():
        metrics.skipped.labels(reason).inc(n)
    for reason, n in res.approximated.items():
        metrics.approximated.labels(reason).inc(n)
    if res.result in ("promoted", "rejected"):
        metrics.last_success.set(time.time())
        metrics.transitions.set(res.transitions)
        for bench, s in res.scores.items():
            for model, v in s.items():
                metrics.eval.labels(bench, model).set(v)


# -- Prometheus history --------------------------------------------------------------------


def _unix(index: pd.Index) -> np.ndarray:
    if len(index) == 0:
        return np.zeros(0)
    epoch = pd.Timestamp(0, tz="UTC")
    return np.asarray((pd.DatetimeIndex(index) - epoch) / pd.Timedelta(seconds=1), dtype=np.float64)


def history_from_frame(frame: pd.DataFrame, capacity: Mapping[str, tuple[float, float]] | None = None) -> NodeHistory:
    """PrometheusSource.history's frame (time x (node, feature)) -> NodeHistory."""
    times = _unix(frame.index)
    values: dict[str, np.ndarray] = {}
    if len(frame.columns):
        for node in frame.columns.get_level_values("node").unique():
            sub = frame.xs(node, axis=1, level="node").reindex(columns=list(FEATURES))
            values[str(node)] = sub.to_numpy(dtype=np.float64)
    cap = capacity or {}
    return NodeHistory(
        times=times,
        values=values,
        cores={n: c for n, (c, _) in cap.items()},
        mem_bytes={n: m for n, (_, m) in cap.items()},
    )


def fetch_history(source: Any, start: float, end: float, step: float, max_points: int = 10000) -> NodeHistory:
    """Node features on a grid aligned to ``step`` over [start, end], in chunks Prometheus accepts.

    Aligning the grid to multiples of ``step`` makes every run (and every test) read the
    same evaluation instants. Capacity (cores, memory) is the newest value of each node
    in the span, so nodes that are gone now still have one.
    """
    from drs_prom import promql

    start = np.floor(start / step) * step
    end = np.ceil(end / step) * step
    frames = []
    t = start
    while t <= end:
        t_end = min(end, t + step * (max_points - 1))
        frames.append(source.history(t, t_end, step))
        t = t_end + step
    frame = pd.concat([f for f in frames if len(f)], axis=0) if any(len(f) for f in frames) else frames[0]
    frame = frame[~frame.index.duplicated(keep="last")].sort_index()
    cap_step = max(step, (end - start) / 1000.0)
    sel = getattr(getattr(source, "settings", None), "node_selector", "")
    capacity: dict[str, tuple[float, float]] = {}
    if hasattr(source, "query_range"):
        from datetime import datetime

        s, e = (datetime.fromtimestamp(x, tz=UTC) for x in (start, end))
        cores = source.query_range(promql.cpu_cores(sel), s, e, cap_step)
        mem = source.query_range(promql.mem_total(sel), s, e, cap_step)
        for node in set(cores.columns) & set(mem.columns):
            c, m = cores[node].dropna(), mem[node].dropna()
            if len(c) and len(m):
                capacity[str(node)] = (float(c.iloc[-1]), float(m.iloc[-1]))
    return history_from_frame(frame, capacity)


# -- training and evaluation ----------------------------------------------------------------


def _hidden_of(layers: Sequence[tuple[np.ndarray, np.ndarray, str]]) -> tuple[int, ...]:
    return tuple(int(k.shape[1]) for k, _, _ in layers[:-1])


def _node_batch(trans: Sequence[Transition], max_nodes: int, window_seconds: float) -> tuple[np.ndarray, ...]:
    """Arrays for NodeReplay/holdout: chosen rows, rewards, padded next candidates, masks, done.

    The serving policy adds the load of its own binds of the last ``window_seconds`` to
    each node's inputs (RecentBinds); replaying the journal's binds in time order gives
    the model those same inputs here, so training never sees what serving does not.
    """
    from drs_prom.agent.features import N_CANDIDATE, candidate_matrix
    from drs_prom.baselines import RecentBinds

    trans = sorted(trans, key=lambda t: t.ctx.now)
    recent = RecentBinds(window_seconds)
    n = len(trans)
    chosen = np.zeros((n, N_CANDIDATE), np.float32)
    reward = np.zeros(n, np.float32)
    nxt = np.zeros((n, max_nodes, N_CANDIDATE), np.float32)
    mask = np.zeros((n, max_nodes), bool)
    done = np.zeros(n, np.float32)
    for i, t in enumerate(trans):
        chosen[i] = candidate_matrix(t.ctx, recent.pending(t.ctx))[t.action]
        recent.record(t.ctx, t.action)
        reward[i] = t.reward
        if t.next_ctx is not None:
            c = candidate_matrix(t.next_ctx, recent.pending(t.next_ctx))
            nxt[i, : len(c)] = c
            mask[i, : len(c)] = t.next_ctx.feasible
        done[i] = float(not mask[i].any())
    return chosen, reward, nxt, mask, done


def td_score(
    layers: Sequence[tuple[np.ndarray, np.ndarray, str]], batch: tuple[np.ndarray, ...], gamma: float
) -> float:
    """Minus the mean Huber TD error of one model on held-out transitions (higher is better).

    The model bootstraps from itself: a model whose Q values are consistent with the
    rewards the cluster really produced scores near 0.
    """
    from drs_prom.agent.policy import forward

    chosen, reward, nxt, mask, done = batch
    q = forward(layers, chosen)[:, 0]
    b, m, f = nxt.shape
    q_next = forward(layers, nxt.reshape(-1, f))[:, 0].reshape(b, m)
    q_next = np.where(mask, q_next, -np.inf).max(axis=1)
    q_next = np.where(np.isfinite(q_next), q_next, 0.0)
    y = reward + gamma * (1.0 - done) * q_next
    err = np.abs(y - q)
    huber = np.where(err <= 1.0, 0.5 * err**2, err - 0.5)
    return -float(huber.mean())


def sim_score(layers: Sequence[tuple[np.ndarray, np.ndarray, str]], settings: Settings, scenario: Any) -> float:
    """Mean reward per decision of the greedy policy in one seeded simulator run (higher is better)."""
    from drs_prom.agent.policy import NodeAgentPolicy
    from drs_prom.agent.train import step_reward
    from drs_prom.sim.env import SchedulingEnv

    env = SchedulingEnv(scenario, seed=settings.retrain.seed, norm=settings.normalisation)
    rewards: list[float] = []
    env.run(
        NodeAgentPolicy(layers),
        seed=settings.retrain.seed,
        on_step=lambda info: rewards.append(step_reward(info, "drs", settings.reward)),
    )
    return float(np.mean(rewards)) if rewards else float("nan")


def benchmark_scenario(settings: Settings) -> Any:
    """The gate's simulator run: the configured scenario cut to ``sim_benchmark_pods`` pods."""
    from drs_prom.sim.scenario import load_scenario

    return load_scenario(settings.retrain.sim_scenario).truncated(settings.retrain.sim_benchmark_pods)


def _sim_replay(agent: Any, settings: Settings, scenario: Any, replay: Any, episodes: int) -> int:
    """Add simulator experience of the model being trained (epsilon-greedy, seeded)."""
    from drs_prom.agent.features import candidate_matrix
    from drs_prom.agent.train import step_reward
    from drs_prom.baselines import RecentBinds
    from drs_prom.sim.env import SchedulingEnv

    recent = RecentBinds(settings.prometheus.window_seconds)  # as the serving policy sees it
    rng = np.random.default_rng(settings.retrain.seed)
    env = SchedulingEnv(scenario, seed=settings.retrain.seed + 7919, norm=settings.normalisation)
    added = 0
    for _ in range(episodes):
        ctx = env.reset()
        done = False
        while not done and ctx is not None:
            cands = candidate_matrix(ctx, recent.pending(ctx))
            mask = np.asarray(ctx.feasible, bool)
            if rng.random() < 0.1:
                a = int(rng.choice(np.flatnonzero(mask)))
            else:
                a = int(np.argmax(np.where(mask, agent.q_values(cands), -np.inf)))
            recent.record(ctx, a)
            nxt, info, done = env.step(a)
            nc = None if done or nxt is None else candidate_matrix(nxt, recent.pending(nxt))
            if len(cands) <= replay.max_nodes and (nc is None or len(nc) <= replay.max_nodes):
                replay.add(
                    cands[a], step_reward(info, "drs", settings.reward), nc, None if nc is None else nxt.feasible, done
                )
                added += 1
            ctx = nxt
    return added


@dataclass
class Trained:
    model: Any  # the Keras online network
    layers: list
    steps: int
    seconds: float
    sim_transitions: int
    gamma: float
    hidden: tuple[int, ...]


def train_candidate(
    start_layers: Sequence[tuple[np.ndarray, np.ndarray, str]] | None,
    train: Sequence[Transition],
    settings: Settings,
    scenario: Any = None,
) -> Trained:
    """A copy of the starting model trained on ``train`` (+ simulator replay) for ``epochs`` passes."""
    from drs_prom.agent.dqn import NodeDQN, NodeDQNConfig
    from drs_prom.agent.features import N_CANDIDATE
    from drs_prom.agent.networks import configure_tf, export_dense
    from drs_prom.agent.replay import NodeReplay

    configure_tf()
    import keras

    t0 = time.perf_counter()
    rs = settings.retrain
    keras.utils.set_random_seed(rs.seed)
    hidden = _hidden_of(start_layers) if start_layers else NodeDQNConfig().hidden
    cfg = NodeDQNConfig(hidden=hidden)
    agent = NodeDQN(N_CANDIDATE, cfg, seed=rs.seed)
    if start_layers:
        weights = [w for k, b, _ in start_layers for w in (k, b)]
        agent.online.set_weights(weights)
        agent.sync_target()
    max_nodes = max(len(t.ctx.nodes) for t in train)
    max_nodes = max([max_nodes] + [len(t.next_ctx.nodes) for t in train if t.next_ctx is not None])
    sim_n = 0
    if rs.sim_replay_episodes and scenario is not None:
        from drs_prom.sim.cluster import Nodes

        max_nodes = max(max_nodes, len(Nodes.from_scenario(scenario)))
    cap = len(train) + (
        rs.sim_replay_episodes * max(scenario.n_pods, 1) if rs.sim_replay_episodes and scenario is not None else 0
    )
    replay = NodeReplay(cap, N_CANDIDATE, max_nodes, seed=rs.seed)
    chosen, reward, nxt, mask, done = _node_batch(train, max_nodes, settings.prometheus.window_seconds)
    n = len(train)
    replay.chosen[:n], replay.reward[:n], replay.next_cands[:n], replay.next_mask[:n], replay.done[:n] = (
        chosen,
        reward,
        nxt,
        mask,
        done,
    )
    replay.size, replay._pos = n, n % cap
    if rs.sim_replay_episodes and scenario is not None:
        sim_n = _sim_replay(agent, settings, scenario, replay, rs.sim_replay_episodes)
    steps = rs.epochs * max(1, int(np.ceil(len(replay) / rs.batch_size)))
    for _ in range(steps):
        agent.learn(replay.sample(rs.batch_size))
    agent.sync_target()
    return Trained(agent.online, export_dense(agent.online), steps, time.perf_counter() - t0, sim_n, cfg.gamma, hidden)


# -- the job ------------------------------------------------------------------------------


def _current_layers(store: ModelStore, settings: Settings) -> tuple[list | None, str | None, str]:
    """Weights of the model the scheduler runs now: the store's current, else the shipped default."""
    from drs_prom.agent import default_model_path, load_model
    from drs_prom.errors import ModelError
    from drs_prom.model_store import MODEL_FILE

    path = store.current_path()
    candidates = []
    if path is not None:
        candidates.append((path / MODEL_FILE, store.current()))
    if settings.scheduler.model_path:
        candidates.append((settings.scheduler.model_path, "configured"))
    candidates.append((default_model_path(), "shipped"))
    notes = []
    for p, name in candidates:
        try:
            loaded = load_model(p)
        except ModelError as exc:
            notes.append(str(exc))
            continue
        if loaded.policy_name != "drs":
            notes.append(f"{p} is a {loaded.policy_name} model; only drs models are retrained")
            continue
        return list(loaded.layers), name, ""
    return None, None, "; ".join(notes)


def _split(trans: list[Transition], fraction: float) -> tuple[list[Transition], list[Transition]]:
    """Oldest for training, newest held out (time order: the gate asks "does it handle what comes next")."""
    k = min(len(trans) - 1, max(1, int(round(len(trans) * fraction))))
    return trans[: len(trans) - k], trans[len(trans) - k :]


def run_once(
    settings: Settings,
    source: Any,
    journal: Journal,
    store: ModelStore,
    *,
    now: float | None = None,
    registry: Any = None,
    scenario: Any = None,
) -> RetrainResult:
    """One retraining run; never raises for bad data or an unreachable Prometheus (result "error").

    ``scenario``: the simulator scenario for the gate benchmark and replay (default: the
    configured one, cut to ``sim_benchmark_pods`` pods).
    """
    from drs_prom.errors import DrsError

    metrics = RetrainMetrics.get(registry)
    t0 = time.perf_counter()
    try:
        res = _run(settings, source, journal, store, time.time() if now is None else now, scenario)
    except DrsError as exc:
        res = RetrainResult("error", reason=str(exc))
    except Exception as exc:  # counted and re-raised: a bug must be visible, the job wrapper contains it
        record(metrics, RetrainResult("error", reason=f"{type(exc).__name__}: {exc}"), time.perf_counter() - t0)
        raise
    record(metrics, res, time.perf_counter() - t0)
    cur = store.current()
    if cur:
        metrics.current.set(store.get(cur).number)
    log.info("%s", res.summary())
    return res


def _run(
    settings: Settings, source: Any, journal: Journal, store: ModelStore, now: float, scenario: Any
) -> RetrainResult:
    from drs_prom.agent.persistence import base_metadata, save_model
    from drs_prom.model_store import MODEL_FILE

    rs = settings.retrain
    secs: dict[str, float] = {}
    delay = reward_delay(settings)
    state = store.state()
    cursor_ts = float(state.get("cursor_ts", now - rs.lookback_seconds))
    cursor_id = int(state.get("cursor_id", -1))

    t = time.perf_counter()
    max_age = settings.prometheus.max_sample_age_seconds
    decisions, skipped = load_decisions(journal, cursor_ts, now - delay - max_age, rs.max_decisions + 1)
    decisions = [d for d in decisions if (d.ts, d.id or 0) > (cursor_ts, cursor_id)]
    capped = len(decisions) > rs.max_decisions
    decisions = decisions[: rs.max_decisions]
    secs["journal"] = time.perf_counter() - t
    res = RetrainResult("insufficient_data", decisions=len(decisions), skipped=dict(skipped), seconds=secs)
    if not decisions:
        res.reason = "no new decisions in the journal"
        return res

    t = time.perf_counter()
    step = rs.query_step_seconds
    history = fetch_history(
        source, decisions[0].ts - max_age - step, min(now, decisions[-1].ts + delay + max_age + step), step
    )
    secs["query"] = time.perf_counter() - t
    t = time.perf_counter()
    trans, more, settled = rebuild_transitions(decisions, history, settings)
    secs["rebuild"] = time.perf_counter() - t
    skipped.update(more)
    res.skipped, res.transitions = dict(skipped), len(trans)
    res.approximated = {"no_node_info": sum(not x.node_info for x in trans)}

    def advance() -> None:
        last = [d for d in decisions if settled is not None and d.ts <= settled]
        if last:
            store.save_state({**store.state(), "cursor_ts": last[-1].ts, "cursor_id": last[-1].id or 0})
            res.cursor = last[-1].ts

    if len(trans) < max(rs.min_transitions, 2):
        res.reason = f"{len(trans)} usable transitions, need {max(rs.min_transitions, 2)}"
        if capped:
            advance()  # a full batch of unusable rows must not block the cursor forever
        return res

    train, held = _split(trans, rs.holdout_fraction)
    res.trained_on, res.held_out = len(train), len(held)
    if scenario is None and (rs.sim_benchmark_pods or rs.sim_replay_episodes):
        scenario = benchmark_scenario(settings)
    current, current_name, note = _current_layers(store, settings)
    res.previous = store.current()

    t = time.perf_counter()
    trained = train_candidate(current, train, settings, scenario)
    secs["train"] = time.perf_counter() - t
    secs["train_steps"] = float(trained.steps)

    t = time.perf_counter()
    max_nodes = max(len(x.ctx.nodes) for x in trans)
    max_nodes = max([max_nodes] + [len(x.next_ctx.nodes) for x in trans if x.next_ctx is not None])
    batch = _node_batch(held, max_nodes, settings.prometheus.window_seconds)
    scores: dict[str, dict[str, float]] = {"holdout_td": {"candidate": td_score(trained.layers, batch, trained.gamma)}}
    if current is not None:
        scores["holdout_td"]["current"] = td_score(current, batch, trained.gamma)
    if rs.sim_benchmark_pods and scenario is not None:
        scores["sim_reward"] = {"candidate": sim_score(trained.layers, settings, scenario)}
        if current is not None:
            scores["sim_reward"]["current"] = sim_score(current, settings, scenario)
    secs["gate"] = time.perf_counter() - t
    verdict = gate(scores, rs.gate_margin)
    res.scores = scores

    meta = base_metadata("drs", settings.normalisation)
    meta["training"] = {
        "kind": "retrain",
        "started_from": current_name or "fresh network",
        "transitions": len(train),
        "held_out": len(held),
        "sim_transitions": trained.sim_transitions,
        "steps": trained.steps,
        "seconds": round(trained.seconds, 2),
        "hidden": list(trained.hidden),
        "journal_span": [decisions[0].ts, decisions[-1].ts],
        "skipped": dict(skipped),
        "approximated": dict(res.approximated),
    }
    meta["gate"] = {"scores": scores, "margin": rs.gate_margin, "promote": verdict.promote, "reason": verdict.reason}
    if note:
        meta["gate"]["current_note"] = note
    info = store.add(
        lambda d: (save_model(trained.model, meta, d / MODEL_FILE), None)[1],
        {"scores": scores, "transitions": len(train)},
    )
    res.version = info.name
    if verdict.promote:
        store.promote(info.name)
        res.result = "promoted"
    else:
        store.set_status(info.name, "rejected", reason=verdict.reason)
        res.result = "rejected"
    res.reason = verdict.reason
    advance()
    return res
