"""The look-ahead rollout over sampled futures: the causal counterpart of the clairvoyant reference."""

import copy
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv, fit_to_scenario, policy_norm
from drs_prom.sim.generator import eval_scenario
from drs_prom.sim.scenario import load_scenario
from drs_prom.sim.trace_sample import materialise
from drs_prom.sim.workload import generate
from drs_prom_research.clairvoyant import branch_nodes, fork_env, play_out, told
from drs_prom_research.lookahead import (
    LOOKAHEAD,
    confident_choice,
    lookahead_run,
    splice_future,
    with_future,
)
from tests.sim.test_replay import small_openb, spec
from tests.specs import SPEC

BASE = "capacity-balanced-overload"


def _mid_episode(scenario, seed, decisions):
    policy = fit_to_scenario(make_policy(BASE, SPEC, seed), scenario)
    env = SchedulingEnv(scenario, seed=seed, norm=policy_norm(policy, scenario))
    env.reset(seed)
    for _ in range(decisions):
        env.step(int(np.flatnonzero(env.ctx.feasible)[0]))
    return env, policy


@pytest.mark.parametrize("name", ["heterogeneous", "eval-diurnal-1"])  # the second has pinned background pods
def test_the_episodes_own_future_spliced_in_changes_nothing(name):
    scenario = eval_scenario(name) if name.startswith("eval-") else load_scenario(name)
    env, policy = _mid_episode(scenario, 0, 25)
    same, same_nodes = play_out(with_future(env, generate(scenario, 0)), copy.deepcopy(policy))
    own, own_nodes = play_out(fork_env(env), copy.deepcopy(policy))
    # the splice re-anchors the arrivals at the last true one (equal to the last bits): the same binds, the same cost
    assert same_nodes == own_nodes and same == pytest.approx(own, rel=1e-12, abs=0.0)
    other = play_out(with_future(env, generate(scenario, 5)), copy.deepcopy(policy))[0]
    assert other != same  # another draw is another future


def test_a_sampled_future_keeps_the_past_and_the_background_and_draws_the_rest():
    scenario = eval_scenario("eval-diurnal-1")
    true, sample = generate(scenario, 0), generate(scenario, 5)
    arrived, now = 60, float(true.arrival[59])
    spliced = splice_future(true, arrived, now, sample)
    assert spliced.names[:arrived] == true.names[:arrived]
    assert np.array_equal(spliced.work[:arrived], true.work[:arrived])
    assert np.all(np.diff(spliced.arrival) >= 0) and np.all(spliced.arrival[arrived:] >= now)
    # the background still to come is the true one; the scheduled pods still to come are the sample's
    assert sorted(n for n in spliced.names[arrived:] if spliced.pinned[spliced.names.index(n)] >= 0) == sorted(
        n for i, n in enumerate(true.names) if i >= arrived and true.pinned[i] >= 0
    )
    rank = int(true.scheduled[:arrived].sum())
    drawn = set(np.array(sample.names)[np.flatnonzero(sample.scheduled)[rank:]])
    future_sched = {n for i, n in enumerate(spliced.names) if i >= arrived and spliced.pinned[i] < 0}
    assert future_sched == drawn
    assert int(spliced.scheduled.sum()) == int(true.scheduled.sum())


def test_lookahead_places_every_pod_and_with_one_branch_is_its_base():
    scenario = load_scenario("heterogeneous").truncated(24)
    policy = fit_to_scenario(make_policy(BASE, SPEC, 0), scenario)
    base = SchedulingEnv(scenario, seed=0, norm=policy_norm(policy, scenario)).run(policy, seed=0)
    one = lookahead_run(scenario, 0, BASE, samples=2, top_k=1)
    assert one.policy == LOOKAHEAD and one.decisions == 24
    assert one.composite == pytest.approx(base.composite, abs=1e-12)
    two = lookahead_run(scenario, 0, BASE, samples=2, top_k=2)
    assert two.decisions == 24 and np.isfinite(two.composite)


def test_the_gate_leaves_the_base_only_for_a_saving_beyond_its_noise():
    # rows: the base's choice, then two candidates, over 4 paired sampled futures
    costs = np.array([[2.0, 2.0, 2.0, 2.0], [1.9, 1.9, 1.9, 1.9], [1.0, 3.0, 1.0, 3.0]])
    assert confident_choice(costs) == 1  # plain argmin of the means: 2.0, 1.9, 2.0 (ties to the base's order)
    assert confident_choice(costs, gate=2.0) == 1  # a steady saving of 0.1 has zero standard error
    noisy = np.array([[2.0, 2.0, 2.0, 2.0], [1.0, 3.0, 1.0, 2.6]])  # mean saving 0.1, SE 0.53
    assert confident_choice(noisy) == 1
    assert confident_choice(noisy, gate=2.0) == 0
    assert confident_choice(np.array([[1.0, 1.0], [1.0, 1.0]]), gate=0.0) == 0  # a tie keeps the base
    assert confident_choice(costs, gate=float("inf")) == 0


def test_the_bases_own_choice_leads_the_candidates():
    scenario = load_scenario("heterogeneous").truncated(40)
    policy = fit_to_scenario(make_policy(BASE, SPEC, 0), scenario)
    env = SchedulingEnv(scenario, seed=0, norm=policy_norm(policy, scenario))
    env.reset(0)
    led = 0
    while env.ctx is not None:
        ctx = env.ctx
        feasible = np.flatnonzero(ctx.feasible).tolist()
        choice = int(branch_nodes(ctx, policy, 1)[0])  # the base's best-scored node
        every = branch_nodes(ctx, policy, None, choice_first=True).tolist()
        assert every == [choice, *(n for n in feasible if n != choice)]  # the rest keep index order
        assert branch_nodes(ctx, policy, None).tolist() == feasible  # without it, index order as before
        top = branch_nodes(ctx, policy, 2, choice_first=True).tolist()
        assert top == branch_nodes(ctx, policy, 2).tolist() and top[0] == choice  # top-k is best first anyway
        led += choice != feasible[0]
        told(policy, ctx, choice)
        env.step(choice)
    assert led > 0  # some decisions really moved the choice to the front


def test_a_gated_lookahead_that_never_finds_a_confident_saving_is_its_base():
    scenario = load_scenario("heterogeneous").truncated(24)
    policy = fit_to_scenario(make_policy(BASE, SPEC, 0), scenario)
    base = SchedulingEnv(scenario, seed=0, norm=policy_norm(policy, scenario)).run(policy, seed=0)
    never = lookahead_run(scenario, 0, BASE, samples=2, top_k=3, gate=float("inf"))
    assert never.composite == pytest.approx(base.composite, abs=1e-12)


def test_the_veil_draws_only_what_a_scheduler_cannot_know_of_the_present():
    scenario = eval_scenario("eval-diurnal-1")  # jittered work and demand, pinned background pods
    env, _ = _mid_episode(scenario, 0, 40)
    sample = generate(scenario, 5)
    true_work, true_demand, true_left = (
        env.workload.work.copy(),
        env.workload.demand.copy(),
        env.cluster.remaining.copy(),
    )
    plain = with_future(env, sample)
    veiled = with_future(env, sample, veil_seed=11)
    wl, c = veiled.workload, veiled.cluster
    current = veiled.current_pod
    running = [int(i) for i in c.running if wl.scheduled[i]]
    assert running and current >= 0
    arrived = np.arange(veiled.arrived)
    drawn = arrived[wl.scheduled[arrived] & np.isnan(c.finish[arrived])].tolist()
    assert set(running) | {current} <= set(drawn)
    # their run time is redrawn within the profile's law and above the work already done
    for i in drawn:
        prof = scenario.profiles[wl.profiles[i]]
        done = plain.workload.work[i] - plain.cluster.remaining[i]
        assert wl.work[i] - c.remaining[i] == pytest.approx(done)
        assert c.remaining[i] > 0
        assert (
            prof.work_seconds * (1 - prof.work_jitter) - 1e-9
            <= wl.work[i]
            <= prof.work_seconds * (1 + prof.work_jitter) + 1e-9
        )
    assert not np.allclose(wl.work[drawn], plain.workload.work[drawn])
    # the placed pod's demand is drawn; running pods' (measurable) demand, finished pods, background stay true
    assert not np.allclose(wl.demand[current], plain.workload.demand[current])
    keep = np.ones(len(wl), bool)
    keep[drawn] = False
    assert np.array_equal(wl.work[keep], plain.workload.work[keep])
    unstarted = [i for i in drawn if np.isnan(c.start[i])]
    assert current in unstarted and not set(running) & set(unstarted)
    assert np.array_equal(np.delete(wl.demand, unstarted, axis=0), np.delete(plain.workload.demand, unstarted, axis=0))
    assert np.array_equal(c.remaining[keep], plain.cluster.remaining[keep])
    # the true episode is untouched, and the same seed draws the same present
    assert np.array_equal(env.workload.work, true_work) and np.array_equal(env.workload.demand, true_demand)
    assert np.array_equal(env.cluster.remaining, true_left)
    again = with_future(env, sample, veil_seed=11)
    assert np.array_equal(again.workload.work, wl.work) and np.array_equal(again.cluster.remaining, c.remaining)


def test_a_veiled_lookahead_places_every_pod():
    scenario = load_scenario("heterogeneous").truncated(24)
    run = lookahead_run(scenario, 0, BASE, samples=2, top_k=2, gate=0.0, veil=True)
    assert run.policy == LOOKAHEAD and run.decisions == 24 and np.isfinite(run.composite)


def test_a_sampled_future_keeps_the_samples_gaps_from_the_true_last_arrival():
    scenario = eval_scenario("eval-diurnal-1")
    true, sample = generate(scenario, 0), generate(scenario, 5)
    arrived, now = 60, float(true.arrival[59])
    spliced = splice_future(true, arrived, now, sample)
    # a sample running far ahead of (or behind) the truth gives the same future: only its gaps count
    for shift in (-500.0, 500.0):
        moved = splice_future(true, arrived, now, dataclasses.replace(sample, arrival=sample.arrival + shift))
        assert np.allclose(moved.arrival, spliced.arrival) and moved.names == spliced.names
    rank = int(true.scheduled[:arrived].sum())
    last_true = true.arrival[np.flatnonzero(true.scheduled)[rank - 1]]
    s_idx = np.flatnonzero(sample.scheduled)
    first_drawn = spliced.names.index(sample.names[s_idx[rank]])
    gap = sample.arrival[s_idx[rank]] - sample.arrival[s_idx[rank - 1]]
    assert spliced.arrival[first_drawn] == pytest.approx(max(last_true + gap, now))


def test_the_sampled_future_rollout_refuses_a_replay(tmp_path: Path) -> None:
    """Every seed of a replay is the same pods, so 'sampled' futures would be the true one."""
    sc, _ = materialise(spec(small_openb(tmp_path)), 0)
    with pytest.raises(ConfigError, match="replays a trace: its futures cannot be sampled"):
        lookahead_run(sc, 0, "kube-default")
