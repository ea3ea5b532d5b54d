"""A scheduler that places by requests refills the room a move frees: which pods of such a scheduler may move."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from drs_prom.config import RebalanceSettings
from drs_prom.features import N_FEATURES
from drs_prom.moves.eligibility import PodFacts
from drs_prom.moves.plan import Candidate, Cooldowns, Move, Placement, plan
from drs_prom.moves.refill import refilled, request_units, usage_per_request

GI = 2.0**30
CAP = np.array([8.0, 32 * GI, 1e8, 1e8, 2e8, 2e8])


def test_usage_per_request_is_per_requested_core_and_byte_over_the_pods_with_known_usage():
    a = (np.array([1.0, 2 * GI, 1e6, 0, 0, 0]), request_units(0.5, GI))
    b = (np.array([0.5, 1 * GI, 3e6, 0, 0, 0]), request_units(0.5, GI))
    unknown = (np.full(N_FEATURES, np.nan), request_units(4.0, 8 * GI))
    rate = usage_per_request([a, b, unknown])
    # cpu 1.5 cores over 1 requested core; memory 3 GiB over 2 GiB; network 4 MB/s over 1 requested core
    assert rate[:3] == pytest.approx([1.5, 1.5, 4e6])
    assert rate[3] == 0.0
    assert np.isnan(usage_per_request([unknown])).all()  # nothing known: no rate


def test_a_pod_hotter_than_its_requests_relieves_its_node_and_an_average_one_does_not():
    node = np.array([0.9, 0.3, 0.1, 0.1, 0.1, 0.1])
    rate = np.array([1.5, 1.0, 1e6, 1e6, 1e6, 1e6])
    tripled = np.array([2.0, GI, 1e6, 1e6, 1e6, 1e6])  # 2 cores on 0.5 requested
    # 0.9 - 2/8 + 1.5*0.5/8 = 0.744: cooler even once its requests are taken again
    assert not refilled(node, CAP, tripled, request_units(0.5, GI), rate)
    average = np.array([0.75, GI, 1e6, 1e6, 1e6, 1e6])  # 1.5 cores per requested core, as the cluster
    assert refilled(node, CAP, average, request_units(0.5, GI), rate)
    # a signal without a rate (nothing requested against it anywhere) brings nothing back
    assert not refilled(node, CAP, average, request_units(0.5, GI), np.full(N_FEATURES, np.nan))


@given(
    st.lists(st.floats(0.05, 0.95), min_size=N_FEATURES, max_size=N_FEATURES),
    st.floats(0.05, 2.0),
    st.floats(0.1, 4.0),
)
@example([0.5, 0.9261125399330677, 0.5, 0.5, 0.5, 0.5], 1.5789767048446248, 2.25)  # (a - b) + b != a in floats
def test_refilled_at_or_under_the_clusters_usage_per_request_and_not_at_twice_it(shares, cores, per_request):
    node = np.array(shares)
    units = request_units(cores, cores * GI)
    rate = np.full(N_FEATURES, per_request)  # the same per requested core and per requested byte
    at_rate = rate * units
    assert refilled(node, CAP, at_rate, units, rate)  # what leaves comes back
    assert refilled(node, CAP, 0.5 * at_rate, units, rate)  # more comes back than left
    # twice the rate on every signal: the node ends cooler wherever its bottleneck is
    assert not refilled(node, CAP, 2.0 * at_rate, units, rate)


def cand(key: str, node: int, cores: float, requested: float, by_requests: bool) -> Candidate:
    facts = PodFacts(
        key=key,
        namespace="ns",
        node=f"n{node}",
        owner_kind="ReplicaSet",
        owner=f"ns/Deployment/{key}",
        age_seconds=3600,
    )
    usage = np.array([cores, GI, 0, 0, 0, 0], dtype=float)
    return Candidate(facts, node, usage, request_units(requested, GI), by_requests)


def moves(cands: list[Candidate], s: RebalanceSettings | None = None) -> tuple[list[str], int]:
    names = ["n0", "n1", "n2"]
    shares = np.full((3, N_FEATURES), 0.1)
    shares[:, 0] = [0.95, 0.3, 0.4]  # n0 hot: 1.6 of its 7.6 cores are its pods', the rest is outside them

    def place(c: Candidate, view: np.ndarray, planned: list[Move]) -> Placement:
        return Placement(1, np.ones(3, dtype=bool))

    s = s or RebalanceSettings()
    got = plan(names, shares, np.tile(CAP, (3, 1)), frozenset({"n0"}), cands, s, Cooldowns(), 0.0, place)
    return [m.pod.key for m in got.moves], got.skipped["refills"]


def pods(by_requests: bool) -> list[Candidate]:
    """Two pods on the hot node that use what the cluster's pods use per request (1 core per requested core), and
    the pods of the cool nodes that make that rate."""
    return [
        cand("a", 0, 0.8, 0.8, by_requests),
        cand("b", 0, 0.8, 0.8, by_requests),
        *(cand(f"c{i}", 1 + i % 2, 1.0, 1.0, by_requests) for i in range(4)),
    ]


def test_kube_schedulers_pods_on_a_node_hot_with_load_outside_them_stay_drs_prom_pods_move():
    assert moves(pods(by_requests=True)) == ([], 2)  # kube-scheduler would refill the room with as much
    moved, refusals = moves(pods(by_requests=False))  # drs-prom's scheduler sees the node's load
    assert moved and refusals == 0
    moved, refusals = moves(pods(by_requests=True), RebalanceSettings(refill_aware=False))
    assert moved and refusals == 0  # the rule off: moved as before


def test_a_kube_scheduler_pod_hotter_than_its_requests_still_moves_off_that_node():
    hot = [*pods(by_requests=True), cand("tripled", 0, 2.4, 0.8, True)]
    assert moves(hot) == (["tripled"], 2)
