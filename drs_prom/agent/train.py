"""The training loop for both agents, on any env with the simulator's reset/step API.

``env.reset() -> ctx``; ``env.step(node_index) -> (ctx_next, info, done)`` where
``info.load_before``/``info.load_after`` are the normalised (n, 6) matrices around the
settled action. One command (``drs-prom train``) reproduces the shipped model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from drs_prom.agent.features import DRS_SCALE, N_CANDIDATE, candidate_matrix, drs_state, drs_state_dim
from drs_prom.baselines import RecentBinds, _default_window
from drs_prom.config import Normalisation, RewardSettings
from drs_prom.policy import DecisionContext, choose
from drs_prom.reward import drs_reward, reward
from drs_prom.state import imbalance


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
    recent_window_seconds: float = field(default_factory=_default_window)
    """Memory of our own binds (the metrics' rate window; the policy's default too)."""
    reward: RewardSettings = field(default_factory=RewardSettings)


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


def step_reward(info: Any, policy: str, settings: RewardSettings) -> float:
    """Reward of one settled action, read from the env's StepInfo."""
    if policy == "drs-original":
        return drs_reward(np.nan_to_num(info.load_after)) * DRS_SCALE
    return reward(
        np.nan_to_num(info.load_before),
        np.nan_to_num(info.load_after),
        float(info.util_after),
        float(info.mean_slowdown_after),
        settings,
    )


def _random_feasible(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def _masked_argmax(q: np.ndarray, mask: np.ndarray) -> int:
    return int(np.argmax(np.where(mask, q, -np.inf)))


def train(make_env: EnvFactory, cfg: TrainConfig, progress: bool = True) -> TrainResult:
    """Train ``cfg.policy`` for ``cfg.episodes`` episodes; returns the online Keras model and curves."""
    from drs_prom.agent.networks import configure_tf

    configure_tf()
    import keras

    keras.utils.set_random_seed(cfg.seed)
    if cfg.policy == "drs":
        return _train_node(make_env, cfg, progress)
    if cfg.policy == "drs-original":
        return _train_drs(make_env, cfg, progress)
    raise ValueError(f"unknown policy {cfg.policy!r} (drs, drs-original)")


def _episode_seed(cfg: TrainConfig, ep: int) -> int:
    return cfg.seed * 100_003 + ep


def _bar(total: int, desc: str, progress: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="ep", disable=not progress, leave=False)


def _train_node(make_env: EnvFactory, cfg: TrainConfig, progress: bool) -> TrainResult:
    from drs_prom.agent.dqn import LinearSchedule, NodeDQN, NodeDQNConfig
    from drs_prom.agent.replay import NodeReplay

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
        notes["imitation"], demos = _imitate(make_env, cfg, agent, replay, max_nodes)
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
            r = step_reward(info, "drs", cfg.reward)
            next_cands = None if done or ctx_next is None else candidate_matrix(ctx_next, recent.pending(ctx_next))
            replay.add(cands[a], r, next_cands, None if next_cands is None else ctx_next.feasible, done)
            steps += 1
            if len(replay) >= cfg.learning_starts and steps % cfg.train_every == 0:
                agent.learn(replay.sample(cfg.batch))
                if demos is not None and cfg.imitate_during_rl:
                    idx = rng.integers(0, len(demos[2]), size=cfg.batch)
                    agent.imitate(demos[0][idx], demos[1][idx], demos[2][idx])
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
        self.seeds = [900_000 + cfg.seed * 101 + k for k in range(cfg.eval_seeds)]
        self.history: list[float] = []
        self.ref: tuple[float, float] | None = None
        env = make_env(self.seeds[0]) if self.seeds else None
        if env is None or not hasattr(env, "run"):
            self.seeds = []
            return
        from drs_prom.baselines import make_policy

        self.ref = self._measure(make_policy("kube-default", cfg.seed))

    def _measure(self, policy: Any) -> tuple[float, float]:
        rs = [self.make_env(s).run(policy, seed=s) for s in self.seeds]  # type: ignore[attr-defined]
        return float(np.mean([r.imbalance for r in rs])), float(np.mean([r.completion_mean for r in rs]))

    def score(self, model: Any) -> float | None:
        if not self.seeds or self.ref is None:
            return None
        from drs_prom.agent.networks import export_dense
        from drs_prom.agent.policy import NodeAgentPolicy

        imb, comp = self._measure(NodeAgentPolicy(export_dense(model)))
        score = imb / self.ref[0] + 2.0 * max(0.0, comp / self.ref[1] - 1.02)
        self.history.append(round(score, 4))
        return score


def _imitate(
    make_env: EnvFactory, cfg: TrainConfig, agent: Any, replay: Any, max_nodes: int
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Warm start: roll out the teacher heuristic, fill the replay with its transitions and
    fit a large-margin loss so the net ranks the teacher's choice first (DQfD-style)."""
    from drs_prom.baselines import make_policy

    teacher = make_policy(cfg.imitate, cfg.seed)
    all_c, all_m, all_a = [], [], []
    for ep in range(cfg.imitate_episodes):
        env = make_env(_episode_seed(cfg, ep + 500_000))
        ctx = env.reset()
        recent = RecentBinds(cfg.recent_window_seconds)
        done = False
        while not done and ctx is not None:
            cands = candidate_matrix(ctx, recent.pending(ctx))
            a, _ = choose(teacher, ctx)
            recent.record(ctx, a)
            padded = np.zeros((max_nodes, N_CANDIDATE), np.float32)
            padded[: len(cands)] = cands
            m = np.zeros(max_nodes, bool)
            m[: len(cands)] = ctx.feasible
            all_c.append(padded)
            all_m.append(m)
            all_a.append(a)
            ctx_next, info, done = env.step(a)
            r = step_reward(info, "drs", cfg.reward)
            nc = None if done or ctx_next is None else candidate_matrix(ctx_next, recent.pending(ctx_next))
            replay.add(cands[a], r, nc, None if nc is None else ctx_next.feasible, done)
            ctx = ctx_next
    c, m, a = np.stack(all_c), np.stack(all_m), np.asarray(all_a)
    rng = np.random.default_rng(cfg.seed)
    losses = []
    for _ in range(cfg.imitate_steps):
        idx = rng.integers(0, len(a), size=cfg.batch)
        losses.append(agent.imitate(c[idx], m[idx], a[idx]))
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
    from drs_prom.agent.dqn import DRSDQN, DRSConfig
    from drs_prom.agent.replay import FlatReplay

    t0 = time.monotonic()
    rng = np.random.default_rng(cfg.seed)
    dcfg = DRSConfig()
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
            raise ValueError("drs-original needs a fixed node count across episodes")
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
            r = step_reward(info, "drs-original", cfg.reward)
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


def plot_curve(result: TrainResult, path: str | Path, title: str) -> Path:
    """Learning curve PNG: episode return and mean imbalance per episode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    ep = np.arange(1, len(result.returns) + 1)
    ax1.plot(ep, result.returns, lw=1)
    ax1.set_ylabel("episode return")
    ax1.set_title(title)
    ax2.plot(ep, result.imbalance, lw=1, color="tab:red")
    ax2.set_ylabel("mean imbalance")
    ax2.set_xlabel("episode")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def save_result(result: TrainResult, cfg: TrainConfig, out: str | Path, norm: Normalisation, command: str = "") -> Path:
    """Write the model (+ JSON metadata) and its learning curve next to it."""
    from drs_prom.agent.persistence import base_metadata, save_model

    meta = base_metadata(cfg.policy, norm, result.n_nodes if cfg.policy == "drs-original" else None)
    conf = asdict(cfg)
    conf["reward"] = cfg.reward.model_dump()
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


def scenario_env_factory(scenario: Any, norm: Normalisation | None = None) -> tuple[EnvFactory, Normalisation]:
    """Env factory over a simulator scenario (name, path or Scenario), and the normalisation it uses.

    ``"a,b"`` mixes scenarios: episode seed s uses the (s mod 2)-th. They must share a
    normalisation (and, for drs-original, a node count).
    """
    from drs_prom.errors import ConfigError
    from drs_prom.sim.env import SchedulingEnv
    from drs_prom.sim.scenario import Scenario, load_scenario

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


def benchmark_summary(
    policy: Any,
    scenario: str,
    seeds: int,
    others: tuple[str, ...] = ("kube-default", "balanced-load", "least-loaded", "random"),
) -> dict[str, Any]:
    """The trained policy against heuristics on bench seeds 0..seeds-1, for the model's metadata."""
    from drs_prom.baselines import make_policy
    from drs_prom.sim.bench import run_bench
    from drs_prom.sim.scenario import load_scenario

    def build(name: str, seed: int) -> Any:
        return policy if name == policy.name else make_policy(name, seed)

    report = run_bench(load_scenario(scenario), list(range(seeds)), [*others, policy.name], build, progress=False)
    out: dict[str, Any] = {"scenario": scenario, "seeds": seeds, "policies": {}}
    for row in report.rows:
        if row.skipped:
            continue
        out["policies"][row.policy] = {
            k: {"mean": round(row.mean(k), 4), "ratio_to_kube_default": round(report.ratio(row.policy, k), 4)}
            for k in ("imbalance", "utilisation", "completion_mean", "completion_p95")
        }
    return out


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
    from drs_prom.agent.networks import export_dense
    from drs_prom.agent.persistence import update_metadata
    from drs_prom.agent.policy import DRSOriginalPolicy, NodeAgentPolicy

    make_env, norm = scenario_env_factory(cfg.scenario, Normalisation.drs_paper() if drs_scales else None)
    result = train(make_env, cfg, progress=progress)
    path = save_result(result, cfg, out, norm, command=command)
    echo(f"trained {cfg.policy} on {cfg.scenario}: {result.steps} steps in {result.seconds:.0f} s -> {path}")
    echo(f"learning curve: {Path(out).with_suffix('.png')}")
    if bench_seeds and not drs_scales:
        layers = export_dense(result.model)
        policy = NodeAgentPolicy(layers) if cfg.policy == "drs" else DRSOriginalPolicy(layers, result.n_nodes)
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
