"""The simulator's resident load is the sum of the expected load of the pods the policy placed that still run.

The test keeps its own ledger of every placement (the pod's ``pod_load`` row on the chosen node, as the
policy saw it) and, at each decision, sums the rows of the placed pods the cluster still runs; the
context's ``resident`` must equal that sum. Background pods (pinned to a node, never decided) run on
the same nodes and must never be counted. The placed pods that ended within the scenario's metric window must
show in ``ended`` as a rate over that window still shows them: their row x (1 - time since the end / window)."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.policies.contract import DecisionContext, choose
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.generator import eval_scenario
from drs_prom.sim.scenario import Scenario, load_scenario
from tests.specs import SPEC


def _play(scenario: Scenario, policy_name: str, seed: int) -> tuple[SchedulingEnv, int, int, int]:
    """One episode, checking ctx.resident and ctx.ended against the ledger at every decision; (env, decisions,
    background pods seen running at a decision, decisions that saw an ended pod still fading)."""
    env = SchedulingEnv(scenario, seed=seed)
    policy = make_policy(policy_name, SPEC, seed)
    ledger: dict[int, tuple[int, np.ndarray]] = {}  # pod -> (node index, expected row) as placed
    ctx: DecisionContext | None = env.reset(seed)
    decisions = background_seen = busy = fading = 0
    w = scenario.metric_window_seconds
    while ctx is not None:
        running = [int(p) for p in env.cluster.running]
        pinned = env.workload.pinned
        background = [p for p in running if pinned is not None and pinned[p] >= 0]
        background_seen += len(background)
        assert not set(background) & set(ledger), "a background pod was placed by the policy"
        want = np.zeros((env.n_nodes, ctx.pod_load.shape[1]))
        for p in running:
            if p in ledger:
                node, row = ledger[p]
                want[node] += row
        assert ctx.resident is not None
        np.testing.assert_allclose(ctx.resident, want, atol=1e-9, err_msg=f"decision {decisions}")
        still = np.zeros_like(want)
        for p, (node, row) in ledger.items():
            since = ctx.now - env.cluster.finish[p]  # NaN while it runs
            if since < w:
                still[node] += row * (1.0 - since / w)
        assert ctx.ended is not None
        np.testing.assert_allclose(ctx.ended, still, atol=1e-9, err_msg=f"decision {decisions}")
        fading += bool(still.any())
        busy += bool(want.any())
        pod = env.current_pod
        node = choose(policy, ctx)[0]
        ledger[pod] = (node, np.nan_to_num(np.asarray(ctx.pod_load[node], dtype=np.float64)))
        ctx, _, _ = env.step(node)
        decisions += 1
    assert busy > 0, "no decision ever saw a placed pod still running: the check proved nothing"
    assert len(env.resident) == 0  # every placed pod ended
    assert not env.resident.matrix(env.node_names).any()
    return env, decisions, background_seen, fading


@pytest.mark.parametrize(
    ("scenario", "policy"),
    [("heterogeneous", "least-loaded"), ("drs-paper", "round-robin"), ("drs-paper-lag", "capacity-balanced-peak")],
)
def test_resident_is_the_sum_of_the_running_placements(scenario: str, policy: str) -> None:
    env, decisions, _, fading = _play(load_scenario(scenario), policy, seed=1)
    assert decisions == env.n_scheduled > 0
    if scenario == "drs-paper-lag":  # its metrics lag long enough that decisions see ended pods fading
        assert fading > 0, "no decision saw an ended pod within the window: the ended check proved nothing"


def test_background_pods_are_never_counted() -> None:
    sc = eval_scenario("shift-overload")
    env, decisions, background_seen, _ = _play(sc, "capacity-balanced-resident", seed=0)
    assert background_seen > 0, "no background pod ran alongside a decision: the scenario tests nothing"
    assert decisions == env.n_scheduled
