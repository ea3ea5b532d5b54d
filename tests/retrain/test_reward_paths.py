"""One transition, two ways to measure it, one reward.

A simulator step (what training and the twin learn from) and the same placement rebuilt
from what the journal and Prometheus history hold (what retraining learns from) must give
the same reward: both become a drs_prom.outcomes.reward.Outcome and go through settled_reward.
"""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.config import RewardSettings, Settings
from drs_prom.policies.contract import choose
from drs_prom.registry import make_policy
from drs_prom.retrain.history_reward import ended_between, pod_slowdowns, run_alone_seconds
from drs_prom.retrain.rebuild import NodeHistory, Transition, rebuild_transitions, reward_delay
from drs_prom.sim.env import SchedulingEnv, StepInfo
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.step_reward import step_reward
from drs_prom.stores.journal import Decision, node_entries
from tests.specs import SPEC

KINDS = [
    RewardSettings(),
    RewardSettings(imbalance_mode="absolute", slowdown_weight=2.0),
    RewardSettings(kind="drs"),
]


class _Step:
    """One simulator decision and what the journal and the metrics would have recorded of it."""

    def __init__(self, env: SchedulingEnv, action: int) -> None:
        ctx = env.ctx
        assert ctx is not None
        self.raw_before = env.source.snapshot().features.to_numpy(dtype=np.float64)
        pod = env.current_pod
        self.decision = Decision(
            pod_uid=f"uid-{pod}",
            pod_name=ctx.pod.name,
            namespace="default",
            pod_features=[float(v) for v in (ctx.pod.demand or ())],
            candidates=list(env.node_names),
            feasible=[bool(v) for v in ctx.feasible],
            chosen=env.node_names[action],
            scores=[0.0] * env.n_nodes,
            policy="least-loaded",
            ts=ctx.now,
            owner=f"owner-{pod}",  # one owner per pod: the test knows each pod's run time alone
            nodes=node_entries(ctx.nodes),
            pod_cpu_m=ctx.pod.cpu_m,
            pod_mem_bytes=ctx.pod.mem_bytes,
        )
        self.work = float(env.workload.work[pod])
        self.info: StepInfo | None = None


def _episode(settings: Settings) -> tuple[SchedulingEnv, list[_Step]]:
    scenario = load_scenario("drs-paper").truncated(60)
    env = SchedulingEnv(scenario, seed=3, norm=settings.normalisation)
    policy = make_policy("kube-default", SPEC, 0)  # spreads by requests: net and disk pods contend
    steps: list[_Step] = []
    ctx = env.reset()
    while ctx is not None:
        action, _ = choose(policy, ctx)
        step = _Step(env, action)
        ctx, step.info, _ = env.step(action)
        steps.append(step)
    return env, steps


def _rebuilt(env: SchedulingEnv, steps: list[_Step], k: int, settings: Settings) -> Transition:
    """Decision k rebuilt as retraining does: journal rows up to the next decision, the pod ends,
    and a history grid holding the metrics at the decision and once it settled."""
    info = steps[k].info
    assert info is not None
    t, delay, age = steps[k].decision.ts, reward_delay(settings), settings.prometheus.max_sample_age_seconds
    times = np.array([t, t + delay, t + delay + age])
    raw = np.stack([steps[k].raw_before, info.metrics_after, info.metrics_after])  # (T, n, features)
    history = NodeHistory(
        times,
        {name: raw[:, i, :] for i, name in enumerate(env.node_names)},
        dict(zip(env.node_names, env.nodes.capacity[:, 0].tolist())),
        dict(zip(env.node_names, env.nodes.capacity[:, 1].tolist())),
    )
    decisions = [s.decision for s in steps[: k + 2]]
    uid = {s.decision.pod_name: s.decision.pod_uid for s in steps}
    ends = {uid[f.name]: f.finish for s in steps for f in (s.info.finished if s.info else ())}
    run_alone = {s.decision.owner or "": s.work for s in steps}
    trans, _skipped, _cursor = rebuild_transitions(decisions, history, settings, ends=ends, run_alone=run_alone)
    mine = [x for x in trans if x.decision_id is None and x.ts == t]
    assert len(mine) == 1
    return mine[0]


def test_one_transition_gets_the_same_reward_from_the_simulator_and_from_history() -> None:
    settings = Settings.model_validate(
        {
            "normalisation": load_scenario("drs-paper").norm.model_dump(),
            "prometheus": {"window": "10s", "max_sample_age_seconds": 15},
            "scheduler": {"settle_seconds": 5},
        }
    )
    env, steps = _episode(settings)
    # steps where pods finished, none of which waited in the queue (the journal records binds, not arrivals),
    # and one of which ran slower than alone: every term of the reward is in play
    chosen = [
        k
        for k, s in enumerate(steps[:-1])
        if s.info is not None
        and s.info.finished
        and all(f.start == f.arrival for f in s.info.finished)
        and max(f.slowdown for f in s.info.finished) > 1.05
    ]
    assert len(chosen) >= 3, "the episode must have contended pods finishing"
    for k in chosen[:3]:
        info = steps[k].info
        assert info is not None
        rebuilt = _rebuilt(env, steps, k, settings)
        np.testing.assert_array_equal(rebuilt.ctx.load, info.load_before)
        np.testing.assert_array_equal(rebuilt.load_after, info.load_after)
        for kind in KINDS:
            want = step_reward(info, kind)
            got = rebuilt.reward if kind == settings.reward else _rebuilt(env, steps, k, _with(settings, kind)).reward
            assert got == pytest.approx(want, rel=1e-12, abs=1e-12), (k, kind)


def _with(settings: Settings, reward: RewardSettings) -> Settings:
    return settings.model_copy(update={"reward": reward})


def test_history_reads_a_pods_run_time_alone_as_its_owners_fastest_run() -> None:
    def d(uid: str, ts: float, owner: str | None) -> Decision:
        return Decision(uid, uid, "default", [0.0] * 6, ["a"], [True], "a", [0.0], "x", ts=ts, owner=owner)

    decisions = [d("1", 0.0, "job/a"), d("2", 10.0, "job/a"), d("3", 5.0, "job/b"), d("4", 7.0, None)]
    ends = {"1": 60.0, "2": 50.0, "3": 100.0, "4": 9.0}
    assert run_alone_seconds(decisions, ends) == {"job/a": 40.0, "job/b": 95.0}
    # slowdown = bind-to-end over the owner's fastest run; an owner-less pod counts 1; a step is (t0, t1]
    slowdowns = pod_slowdowns(decisions, ends, run_alone_seconds(decisions, ends))
    assert ended_between(slowdowns, 9.0, 50.0) == (1.0,)  # pod 2 (the fastest of job/a); pod 4 ended at 9, before
    assert ended_between(slowdowns, 8.0, 9.0) == (1.0,)  # pod 4 (no owner)
    assert ended_between(slowdowns, 50.0, 60.0) == (1.5,)  # pod 1: 60 s where job/a can run in 40
    assert ended_between(slowdowns, 60.0, 1e9) == (1.0,)  # pod 3: the only one of job/b
