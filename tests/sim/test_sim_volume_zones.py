"""A profile's ``volume_zones``: each pod mounts a bound claim whose volume lives in one zone, and the simulator's
feasible set (the live scheduler's VolumeBinding / VolumeZone code) keeps the pod in that zone; a scenario whose
volumes allow every zone decides exactly as without them."""

from __future__ import annotations

from collections import Counter
from importlib import resources

import pytest

from drs_prom.errors import ConfigError
from drs_prom.policies.contract import choose
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.placement import ZONE_LABEL
from drs_prom.sim.scenario import Scenario, load_scenario, parse_scenario
from drs_prom.sim.workload import generate
from tests.specs import SPEC


@pytest.fixture(scope="module")
def constraints() -> Scenario:
    return load_scenario("constraints")


def _with_batch_placement(scenario: Scenario, placement: dict) -> Scenario:
    profiles = {k: v.model_dump() for k, v in scenario.profiles.items()}
    profiles["batch"]["placement"] = placement
    return scenario.with_changes(profiles=profiles)


def _binds(env: SchedulingEnv, policy: str, seed: int) -> list[tuple[int, int]]:
    """(pod, node) of every decision of one episode."""
    ctx = env.reset(seed)
    pol = make_policy(policy, SPEC, seed)
    out = []
    while ctx is not None:
        idx, _ = choose(pol, ctx)
        out.append((env.current_pod, idx))
        ctx, _, _ = env.step(idx)
    return out


def _out_of_zone(env: SchedulingEnv, binds: list[tuple[int, int]], zones: tuple[str, ...]) -> int:
    """Binds of a pod with a volume to a node of another zone, read from the node labels (not via the filters)."""
    return sum(1 for pod, node in binds if zones[pod] and env.nodes.labels[node].get(ZONE_LABEL) != zones[pod])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", ["kube-default", "least-loaded", "round-robin"])
def test_every_pod_with_a_volume_runs_in_its_volume_zone(constraints, policy, seed):
    env = SchedulingEnv(constraints, seed=seed)
    binds = _binds(env, policy, seed)
    zones = env.workload.volume_zone
    assert zones is not None
    assert Counter(z for z in zones if z).keys() == {"zone-a", "zone-b"}  # drawn per pod, both zones used
    assert env.workload.pod_request(zones.index("zone-a")).claims  # the request carries the claim
    assert _out_of_zone(env, binds, zones) == 0
    assert len(binds) == len(env.workload)  # every pod placed: none refused for its claim


def test_without_volumes_the_same_pods_leave_their_zone(constraints):
    """The checker can fail: the same workload without the volumes (the field removed) puts pods of the batch
    profile on nodes outside the zone their volume would have had."""
    bare = _with_batch_placement(constraints, {})
    broken = 0
    for seed in (0, 1, 2):
        zones = generate(constraints, seed).volume_zone
        assert zones is not None
        env = SchedulingEnv(bare, seed=seed)
        broken += _out_of_zone(env, _binds(env, "least-loaded", seed), zones)
    assert broken > 0


@pytest.mark.parametrize("policy", ["kube-default", "least-loaded"])
def test_volumes_in_the_only_zone_change_nothing(constraints, policy):
    """On a cluster with one zone the volumes constrain nothing: the bench numbers equal those without the field
    (the volume filters run, and remove no node), and the field leaves the rest of the workload as it was."""
    nodes = [t.model_dump() | {"labels": {ZONE_LABEL: "zone-a"}} for t in constraints.nodes]
    one_zone = _with_batch_placement(constraints, {}).with_changes(nodes=nodes)
    every = _with_batch_placement(one_zone, {"volume_zones": ["zone-a"]})
    bare = one_zone
    with_field, without = generate(every, 0), generate(bare, 0)
    assert with_field.volume_zone is not None and without.volume_zone is None
    assert with_field.names == without.names and (with_field.demand == without.demand).all()
    got = [SchedulingEnv(sc, seed=0).run(make_policy(policy, SPEC, 0)) for sc in (every, bare)]
    assert (got[0].composite, got[0].completion_mean) == (got[1].composite, got[1].completion_mean)


@pytest.mark.parametrize(
    ("zones", "says"),
    [
        ("[zone-x]", "profile 'batch': no node it fits has topology.kubernetes.io/zone=zone-x (volume_zones)"),
        ("[zone-a, zone-a]", "volume_zones must be distinct, non-empty zone names"),
        ("zone-a", "volume_zones"),
    ],
)
def test_a_bad_volume_zones_field_is_refused_in_one_line(zones, says):
    text = resources.files("drs_prom.sim").joinpath("scenarios", "constraints.yaml").read_text()
    assert "placement: {volume_zones: [zone-a, zone-b]}" in text
    bad = text.replace("placement: {volume_zones: [zone-a, zone-b]}", f"placement: {{volume_zones: {zones}}}")
    with pytest.raises(ConfigError) as err:
        parse_scenario(bad, "bad.yaml")
    assert says in str(err.value) and "\n" not in str(err.value)
