"""Owners in the simulator: a scenario's pods belong to owners whose stored usage the policies learn from, and what
the policies are told of a pod's usage (estimated by default, told on request)."""

from __future__ import annotations

import numpy as np
import pytest

from drs_prom.sim.env import ESTIMATED, TOLD, SchedulingEnv, sim_policy
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.usage_history import SimUsageHistory, pod_table
from drs_prom.sim.workload import generate
from drs_prom.usage.estimator import OWNER, REQUESTS

HETEROGENEOUS = load_scenario("heterogeneous")


def _with_owners(scenario, **owners):
    data = scenario.model_dump()
    for prof in data["profiles"].values():
        prof["owners"] = owners
    return scenario.with_changes(profiles=data["profiles"])


def test_a_scenario_without_owners_has_one_per_profile_and_unchanged_pods():
    plain = generate(HETEROGENEOUS, 3)
    index, names, images = plain.owners
    assert set(names) == {"Job/video", "Job/net", "Job/disk"} and set(images) == {"video", "net", "disk"}
    assert [names[i] for i in index] == [f"Job/{p}" for p in plain.profiles]
    one = generate(_with_owners(HETEROGENEOUS, count=1), 3)  # one owner, no spread: the same pods
    np.testing.assert_array_equal(one.demand, plain.demand)
    np.testing.assert_array_equal(one.cpu_m, plain.cpu_m)
    np.testing.assert_array_equal(one.arrival, plain.arrival)


def test_owners_use_and_request_their_own_and_new_ones_start_late():
    sc = load_scenario("tenants")
    wl = generate(sc, 0)
    index, names, _ = wl.owners
    assert len(names) == 12 and all(n.startswith("Deployment/") for n in names)
    half = wl.arrival[0] + (wl.arrival[-1] - wl.arrival[0]) / 2
    late = [o for o in range(len(names)) if (wl.arrival[index == o] >= half).all()]
    assert 3 <= len(late) <= 4  # a third of each profile's four owners begins only in the second half
    video = [o for o in range(len(names)) if names[o].startswith("Deployment/video-")]
    cpu = [wl.demand[index == o, 0].mean() / (wl.estimate[index == o, 0].mean()) for o in video]
    assert cpu == pytest.approx([1.0] * 4)  # the told usage follows the owner; only per-pod jitter differs
    own_cpu = {round(float(wl.estimate[index == o, 0][0]), 6) for o in video}
    assert len(own_cpu) == 4  # each owner has its own usage
    assert len({int(wl.cpu_m[index == o][0]) for o in video}) == 4  # and its own requests


def test_the_stored_usage_is_what_ran_and_appears_after_a_rate_window():
    sc = load_scenario("tenants")
    env = SchedulingEnv(sc, seed=0)
    ctx = env.reset(0)
    history = SimUsageHistory(env.cluster, 5.0)
    policy = sim_policy("kube-default", sc, 0)
    sources = []
    from drs_prom.policies.contract import choose

    while ctx is not None:
        sources.append(ctx.pod.demand_source)
        ctx, _, _ = env.step(choose(policy, ctx)[0])
    assert sources[0] == REQUESTS and sources.count(OWNER) > 0.8 * len(sources)
    table = pod_table(env.cluster)
    assert len(table) == 200 and (table.mean[:, 0] > 0).all()
    # a finished pod is stored with its whole run's mean; nothing younger than the window is stored
    last = float(env.cluster.t)
    got = history.owner("default", table.owner[0], last)
    assert len(got) == sum(o == table.owner[0] for o in table.owner)
    assert history.owner("default", table.owner[0], float(table.start[0]) + 1.0).seconds.size == 0


def test_the_told_regime_is_an_oracle_labelled_as_such():
    told = SchedulingEnv(HETEROGENEOUS, seed=0, information=TOLD).reset(0)
    estimated = SchedulingEnv(HETEROGENEOUS, seed=0).reset(0)
    assert told.pod.demand_source == TOLD and estimated.pod.demand_source == REQUESTS
    assert told.pod.demand != estimated.pod.demand  # the first pod: nothing stored yet, only its requests
    with pytest.raises(ValueError, match="information must be one of estimated, told"):
        SchedulingEnv(HETEROGENEOUS, information="psychic")
    assert SchedulingEnv(HETEROGENEOUS).information == ESTIMATED
