"""The training loop for both agents, on any env with the simulator's reset/step API.

``env.reset() -> ctx``; ``env.step(node_index) -> (ctx_next, info, done)`` where
``info.load_before``/``info.load_after`` are the normalised (n, N_FEATURES) matrices around the
settled action. Saving, plotting and benchmarking the result are in drs_prom.training.train_run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from drs_prom.agent.dqn import DRSDQN, DRSConfig, LinearSchedule, NodeDQN, NodeDQNConfig
from drs_prom.agent.model_inputs import N_CANDIDATE, candidate_matrix, drs_state, drs_state_dim
from drs_prom.agent.networks import configure_tf, export_dense
from drs_prom.agent.numpy_policy import NodeAgentPolicy
from drs_prom.agent.replay_buffer import FlatReplay, NodeReplay
from drs_prom.config import ObjectiveSettings, RewardSettings
from drs_prom.errors import ConfigError
from drs_prom.policies.contract import DecisionContext
from drs_prom.policies.recent_binds import RecentBinds
from drs_prom.registry import PolicySpec, configured_spec, make_policy
from drs_prom.signals.state import imbalance
from drs_prom.sim.demos import teacher_demonstrations
from drs_prom.sim.step_reward import step_reward


class Env(Protocol):
    def reset(self) -> DecisionContext: ...

    def step(self, action: int) -> tuple[DecisionContext | None, Any, bool]: ...


EnvFactory = Callable[[int], Env]
"""Builds the env for one episode from that episode's seed (arrivals differ per episode)."""


@dataclass(frozen=True)
class TrainConfig:
    """One training run; defaults are those of the shipped ``drs`` model."""

    policy: str = "drs"
    episodes: int = 60
    seed: int = 0
    scenario: str = "drs-paper"
    replay_size: int = 50_000
    batch: int = 64
    learning_starts: int = 500
    """Transitions collected before the first learn step."""
    train_every: int = 1
    eps_start: float = 1.0
    eps_end: float = 0.02
    exploration_fraction: float = 0.5
    """Fraction of episodes over which epsilon decays linearly."""
    imitate: str = ""
    """Heuristic to warm-start from (baselines registry name); empty for pure RL."""
    imitate_episodes: int = 10
    """Teacher episodes recorded for the warm start (their transitions also seed the replay)."""
    imitate_steps: int = 3000
    imitate_during_rl: bool = True
    """DQfD: keep one large-margin step on the teacher's decisions after every TD step."""
    hidden: tuple[int, ...] = (64, 64)
    gamma: float = 0.5
    lr: float = 1e-3
    target_sync: int = 250
    eval_every: int = 5
    """Episodes between greedy evaluations on held-out seeds; the best-scoring weights are
    kept (RL curves are noisy: the last episode is rarely the best). 0 keeps the last."""
    eval_seeds: int = 8
    recent_window_seconds: float = field(default_factory=lambda: configured_spec().metric_window_seconds)
    """The policies' recent-bind memory (``drs-prom train`` passes the settings' prometheus.window)."""
    """Memory of our own binds (the metrics' rate window; the policy's default too)."""
    reward: RewardSettings = field(default_factory=RewardSettings)
    objectives: ObjectiveSettings = field(default_factory=ObjectiveSettings)
    """Weights of the composite reward (``reward.kind: composite``)."""


@dataclass
class TrainResult:
    model: Any
    returns: list[float]
    imbalance: list[float]
    epsilon: list[float]
    seconds: float
    steps: int
    n_nodes: int
    notes: dict[str, Any] = field(default_factory=dict)


def _random_feasible(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def _masked_argmax(q: np.ndarray, mask: np.ndarray) -> int:
    return int(np.argmax(np.where(mask, q, -np.inf)))


def train(make_env: EnvFactory, cfg: TrainConfig, progress: bool = True) -> TrainResult:
    """Train ``cfg.policy`` for ``cfg.episodes`` episodes; returns the online Keras model and curves."""
    configure_tf()
    import keras

    keras.utils.set_random_seed(cfg.seed)
    if cfg.policy == "drs":
        return _train_node(make_env, cfg, progress)
    if cfg.policy == "drs-original":
        return _train_drs(make_env, cfg, progress)
    raise ConfigError(f"unknown policy {cfg.policy!r} (drs, drs-original)")


def _episode_seed(cfg: TrainConfig, ep: int) -> int:
    return cfg.seed * 100_003 + ep


def _bar(total: int, desc: str, progress: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="ep", disable=not progress, leave=False)


def _train_node(make_env: EnvFactory, cfg: TrainConfig, progress: bool) -> TrainResult:
    t0 = time.monotonic()
    rng = np.random.default_rng(cfg.seed)
    agent = NodeDQN(
        N_CANDIDATE,
        NodeDQNConfig(hidden=cfg.hidden, lr=cfg.lr, gamma=cfg.gamma, target_sync=cfg.target_sync),
        seed=cfg.seed,
    )
    probe = make_env(_episode_seed(cfg, 0)).reset()
    max_nodes = len(probe.nodes)
    replay = NodeReplay(cfg.replay_size, N_CANDIDATE, max_nodes, seed=cfg.seed)
    notes: dict[str, Any] = {}
    steps = 0
    demos = None
    if cfg.imitate and cfg.imitate_episodes > 0:
        notes["imitation"], demos = _imitate(make_env, cfg, agent, replay)
    eps = LinearSchedule(cfg.eps_start, cfg.eps_end, max(1, int(cfg.episodes * cfg.exploration_fraction)))
    returns, imbs, epsl = [], [], []
    selector = _Selector(make_env, cfg)
    best: tuple[float, int, Any] | None = None
    if cfg.eval_every:
        score = selector.score(agent.online)  # episode 0: the warm start (or the random init)
        if score is not None:
            best = (score, 0, agent.online.get_weights())
    bar = _bar(cfg.episodes, "train drs", progress)
    for ep in range(cfg.episodes):
        e = eps(ep)
        env = make_env(_episode_seed(cfg, ep + 1000))
        ctx: DecisionContext | None = env.reset()
        recent = RecentBinds(cfg.recent_window_seconds)
        cands = candidate_matrix(ctx, recent.pending(ctx))
        ret, imb, n = 0.0, 0.0, 0
        done = False
        while not done and ctx is not None:
            mask = np.asarray(ctx.feasible, bool)
            if rng.random() < e:
                a = _random_feasible(rng, mask)
            else:
                a = _masked_argmax(agent.q_values(cands), mask)
            recent.record(ctx, a)
            ctx_next, info, done = env.step(a)
            r = step_reward(info, cfg.reward, cfg.objectives)
            next_cands = None if done or ctx_next is None else candidate_matrix(ctx_next, recent.pending(ctx_next))
            replay.add(cands[a], r, next_cands, None if next_cands is None else ctx_next.feasible, done)
            steps += 1
            if len(replay) >= cfg.learning_starts and steps % cfg.train_every == 0:
                agent.learn(replay.sample(cfg.batch))
                if demos is not None and cfg.imitate_during_rl:
                    agent.imitate_batches(demos, 1, cfg.batch, rng)
            ret += r
            imb += imbalance(np.nan_to_num(info.load_after))
            n += 1
            ctx, cands = ctx_next, next_cands
        returns.append(ret)
        imbs.append(imb / max(n, 1))
        epsl.append(e)
        bar.update(1)
        bar.set_postfix(ret=f"{ret:.2f}", imb=f"{imbs[-1]:.3f}", eps=f"{e:.2f}")
        if cfg.eval_every and ((ep + 1) % cfg.eval_every == 0 or ep + 1 == cfg.episodes):
            score = selector.score(agent.online)
            if score is not None and (best is None or score < best[0]):
                best = (score, ep + 1, agent.online.get_weights())
    bar.close()
    if best is not None:
        agent.online.set_weights(best[2])
        notes["selected"] = {"episode": best[1], "score": round(best[0], 4), "evaluations": selector.history}
    return TrainResult(agent.online, returns, imbs, epsl, time.monotonic() - t0, steps, max_nodes, notes)


class _Selector:
    """Scores greedy policies on held-out seeds (never the benchmark's 0..N-1): imbalance
    relative to kube-default on the same workloads, plus a penalty once mean completion
    time is more than 2% above kube-default's (lower is better; 1.0 = kube-default)."""

    def __init__(self, make_env: EnvFactory, cfg: TrainConfig) -> None:
        self.make_env = make_env
        self.window = cfg.recent_window_seconds
        self.seeds = [900_000 + cfg.seed * 101 + k for k in range(cfg.eval_seeds)]
        self.history: list[float] = []
        self.ref: tuple[float, float] | None = None
        env = make_env(self.seeds[0]) if self.seeds else None
        if env is None or not hasattr(env, "run"):
            self.seeds = []
            return
        self.ref = self._measure(make_policy("kube-default", _spec(cfg), cfg.seed))

    def _measure(self, policy: Any) -> tuple[float, float]:
        rs = [self.make_env(s).run(policy, seed=s) for s in self.seeds]  # type: ignore[attr-defined]
        return float(np.mean([r.imbalance for r in rs])), float(np.mean([r.completion_mean for r in rs]))

    def score(self, model: Any) -> float | None:
        if not self.seeds or self.ref is None:
            return None
        imb, comp = self._measure(NodeAgentPolicy(export_dense(model), self.window))
        score = imb / self.ref[0] + 2.0 * max(0.0, comp / self.ref[1] - 1.02)
        self.history.append(round(score, 4))
        return score


def _spec(cfg: TrainConfig) -> PolicySpec:
    """The configured spec with the training run's window (what the teacher and the reference are built from)."""
    return replace(configured_spec(), metric_window_seconds=cfg.recent_window_seconds)


def _imitate(
    make_env: EnvFactory, cfg: TrainConfig, agent: Any, replay: NodeReplay
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Warm start: roll out the teacher heuristic, fill the replay with its transitions and
    fit a large-margin loss so the net ranks the teacher's choice first (DQfD-style)."""
    seeds = [_episode_seed(cfg, ep + 500_000) for ep in range(cfg.imitate_episodes)]
    teacher = make_policy(cfg.imitate, _spec(cfg), cfg.seed)
    c, m, a = teacher_demonstrations(
        make_env, teacher, seeds, replay, cfg.reward, cfg.recent_window_seconds, cfg.objectives
    )
    losses = agent.imitate_batches((c, m, a), cfg.imitate_steps, cfg.batch, np.random.default_rng(cfg.seed))
    agent.sync_target()
    q = np.stack([agent.q_values(ci[: len(ci)]) for ci in c[:500]])
    agree = float(np.mean(np.argmax(np.where(m[:500], q, -np.inf), axis=1) == a[:500]))
    info = {
        "teacher": cfg.imitate,
        "decisions": len(a),
        "steps": cfg.imitate_steps,
        "final_loss": float(np.mean(losses[-50:])) if losses else None,
        "agreement": agree,
    }
    return info, (c, m, a)


def _train_drs(make_env: EnvFactory, cfg: TrainConfig, progress: bool) -> TrainResult:
    """DRS as published: constant 0.9 greedy, replay 100, batch 32, learn once the buffer is full."""
    t0 = time.monotonic()
    rng = np.random.default_rng(cfg.seed)
    dcfg = DRSConfig()
    reward = cfg.reward.model_copy(update={"kind": "drs"})  # DRS as published learns from its own reward
    probe = make_env(_episode_seed(cfg, 0)).reset()
    n_nodes = len(probe.nodes)
    agent = DRSDQN(n_nodes, dcfg, seed=cfg.seed)
    replay = FlatReplay(dcfg.replay, drs_state_dim(n_nodes), n_nodes, seed=cfg.seed)
    returns, imbs, epsl = [], [], []
    steps = 0
    bar = _bar(cfg.episodes, "train drs-original", progress)
    for ep in range(cfg.episodes):
        env = make_env(_episode_seed(cfg, ep + 1000))
        ctx = env.reset()
        if len(ctx.nodes) != n_nodes:
            raise ConfigError("drs-original needs a fixed node count across episodes")
        state = drs_state(ctx)
        ret, imb, n = 0.0, 0.0, 0
        done = False
        while not done and ctx is not None:
            mask = np.asarray(ctx.feasible, bool)
            if rng.random() < dcfg.greedy:
                a = _masked_argmax(agent.q_values(state), mask)
            else:
                a = _random_feasible(rng, mask)
            ctx_next, info, done = env.step(a)
            r = step_reward(info, reward)
            next_state = None if done or ctx_next is None else drs_state(ctx_next)
            replay.add(state, a, r, next_state, done)
            steps += 1
            if len(replay) >= dcfg.replay:
                agent.learn(replay.sample(dcfg.batch))
            ret += r
            imb += imbalance(np.nan_to_num(info.load_after))
            n += 1
            ctx, state = ctx_next, next_state
        returns.append(ret)
        imbs.append(imb / max(n, 1))
        epsl.append(1.0 - dcfg.greedy)
        bar.update(1)
        bar.set_postfix(ret=f"{ret:.1f}", imb=f"{imbs[-1]:.3f}")
    bar.close()
    return TrainResult(
        agent.online, returns, imbs, epsl, time.monotonic() - t0, steps, n_nodes, {"drs_config": asdict(dcfg)}
    )
