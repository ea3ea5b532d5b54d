"""The simulator enforces the inter-pod filters (host ports, topology spread, pod anti-affinity) for scenarios
whose profiles declare a ``Placement``, and leaves every other scenario's results as they were."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from drs_prom.constraints import chain
from drs_prom.policies.contract import choose
from drs_prom.registry import make_policy
from drs_prom.sim.env import TOLD, SchedulingEnv
from drs_prom.sim.scenario import Scenario, load_scenario
from tests.sim.helpers import tiny
from tests.specs import SPEC


@pytest.fixture(scope="module")
def constraints() -> Scenario:
    return load_scenario("constraints")


def _violations(env: SchedulingEnv, pod: int, node: int) -> list[str]:
    """What binding ``pod`` to ``node`` would break, counted directly from the running pods (not via the filters)."""
    wl, c = env.workload, env.cluster
    placement = wl.placement[pod] if wl.placement is not None else None
    if not placement:
        return []
    labels = env.nodes.labels
    profile = wl.profiles[pod]
    replicas = [int(q) for q in c.running if wl.profiles[q] == profile]
    out = []
    if placement.anti_affinity:
        key = placement.anti_affinity
        if any(labels[c.node_of[q]].get(key) == labels[node].get(key) for q in replicas):
            out.append("anti-affinity")
    if placement.host_port and any(c.node_of[q] == node for q in replicas):
        out.append("host port")
    if placement.spread:
        key = placement.spread
        counts = Counter({lab[key]: 0 for lab in labels if key in lab})  # every node is eligible (no selector)
        counts.update(labels[c.node_of[q]][key] for q in replicas)
        if counts[labels[node][key]] + 1 - min(counts.values()) > placement.max_skew:
            out.append("spread")
    return out


def _episode(env: SchedulingEnv, policy: str, seed: int) -> tuple[list[str], int]:
    """Run one episode, checking every bind before it is made; (violations, binds of constrained pods)."""
    ctx = env.reset(seed)
    pol = make_policy(policy, SPEC, seed)
    broken: list[str] = []
    constrained = 0
    while ctx is not None:
        idx, _ = choose(pol, ctx)
        pod = env.current_pod
        assert env.workload.placement is not None
        constrained += bool(env.workload.placement[pod])
        broken += _violations(env, pod, idx)
        ctx, _, _ = env.step(idx)
    return broken, constrained


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", ["kube-default", "least-loaded", "round-robin"])
def test_every_bind_keeps_anti_affinity_spread_and_host_ports(constraints, policy, seed):
    env = SchedulingEnv(constraints, seed=seed)
    broken, constrained = _episode(env, policy, seed)
    assert constrained > 20  # web and cache replicas were decided, not skipped
    assert broken == []
    assert env.result(policy).decisions == len(env.workload)  # every pod placed in the end: waiting, not dropped


def test_without_the_inter_pod_filters_the_same_episodes_break_them(constraints, monkeypatch):
    """The checker above can fail: with the filters that read the placed pods switched off (the simulator before it
    had them), the same episodes place replicas together and on taken host ports."""
    monkeypatch.setattr(chain, "placed_mask", lambda pod, nodes, near, candidates, hints: candidates)
    broken: Counter[str] = Counter()
    for seed in (0, 1, 2):
        env = SchedulingEnv(constraints, seed=seed)
        broken.update(_episode(env, "kube-default", seed)[0])
    assert broken["anti-affinity"] > 0 and broken["host port"] > 0


def test_replicas_wait_when_no_node_is_left():
    """Three replicas with hostname anti-affinity on two nodes: the third waits until one finishes."""
    scenario = tiny(
        nodes=2,
        pods=3,
        rate=100.0,
        work=10.0,
        extra_profiles="    placement: {anti_affinity: kubernetes.io/hostname}",
    )
    env = SchedulingEnv(scenario, seed=0)
    result = env.run(make_policy("kube-default", SPEC, 0))
    assert result.max_queue == 1
    starts = np.sort(env.cluster.start)
    assert starts[2] >= starts[0] + 9.0  # the third started only when a replica's node freed up


# Results of the simulator before it had the inter-pod filters (composite, completion_mean), for a scenario with no
# placement: they must not move.
BEFORE = {
    "kube-default": (2.3136115370003445, 61.96015507392078),
    "least-loaded": (2.0798721693457782, 59.37916194318127),
}


@pytest.mark.parametrize("policy", sorted(BEFORE))
def test_a_scenario_without_placement_gives_the_same_results(policy):
    env = SchedulingEnv(load_scenario("drs-paper"), seed=0, information=TOLD)  # the pods' usage as BEFORE had it
    result = env.run(make_policy(policy, SPEC, 0))
    assert not env._interpod  # the inter-pod filters are not even consulted
    assert (result.composite, result.completion_mean) == BEFORE[policy]
