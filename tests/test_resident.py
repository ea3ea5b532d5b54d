"""ResidentLoad: the per-node sum of the expected load rows of running placements, keyed by pod."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.features import N_FEATURES
from drs_prom.policies.resident import ResidentLoad


def _row(*head: float) -> np.ndarray:
    r = np.zeros(N_FEATURES)
    r[: len(head)] = head
    return r


def test_rows_sum_per_node_and_a_node_is_exactly_zero_after_its_last_pod() -> None:
    res = ResidentLoad()
    res.add("a", "n1", _row(0.1, 0.2))
    res.add("b", "n1", _row(0.2, 0.05, 0.3))
    res.add("c", "n2", _row(0.7))
    assert len(res) == 3
    assert (res.count("n1"), res.count("n2"), res.count("n3")) == (2, 1, 0)
    m = res.matrix(["n1", "n2", "n3"])
    assert m.shape == (3, N_FEATURES)
    np.testing.assert_allclose(m[0], _row(0.3, 0.25, 0.3))
    np.testing.assert_allclose(m[1], _row(0.7))
    assert not m[2].any()
    assert res.drop("a")
    np.testing.assert_allclose(res.matrix(["n1"])[0], _row(0.2, 0.05, 0.3))
    assert res.drop("b")
    # 0.1 + 0.2 - 0.1 - 0.2 is not 0.0 in floating point; the node's sum must be exactly zero all the same
    assert np.array_equal(res.matrix(["n1"])[0], np.zeros(N_FEATURES))
    assert len(res) == 1 and res.count("n1") == 0


def test_adding_a_pod_again_moves_it_instead_of_counting_it_twice() -> None:
    res = ResidentLoad()
    res.add("a", "n1", _row(0.4))
    res.add("a", "n1", _row(0.5))  # same node, new expectation: replaced
    assert len(res) == 1
    np.testing.assert_allclose(res.matrix(["n1"])[0], _row(0.5))
    res.add("a", "n2", _row(0.6))  # another node: moved
    assert len(res) == 1
    m = res.matrix(["n1", "n2"])
    assert not m[0].any()
    np.testing.assert_allclose(m[1], _row(0.6))


def test_dropping_an_unknown_pod_is_false_and_changes_nothing() -> None:
    res = ResidentLoad()
    res.add("a", "n1", _row(0.4))
    assert res.drop("zzz") is False
    assert res.drop("a") is True
    assert res.drop("a") is False  # a second drop of the same pod (DELETED after terminal) is harmless
    assert len(res) == 0 and not res.matrix(["n1"]).any()


def test_keep_only_forgets_the_pods_not_listed_and_clear_forgets_all() -> None:
    res = ResidentLoad()
    res.add("a", "n1", _row(0.1))
    res.add("b", "n1", _row(0.2))
    res.add("c", "n2", _row(0.3))
    res.keep_only({"b", "unknown"})
    assert len(res) == 1
    m = res.matrix(["n1", "n2"])
    np.testing.assert_allclose(m[0], _row(0.2))
    assert not m[1].any()
    res.clear()
    assert len(res) == 0 and not res.matrix(["n1", "n2"]).any()


def test_nan_in_a_row_counts_as_zero_and_unknown_nodes_read_zeros() -> None:
    res = ResidentLoad()
    res.add("a", "n1", [0.2, np.nan, 0.1, 0.0, 0.0, 0.0])
    res.add("b", "n1", _row(0.1, 0.3))
    m = res.matrix(["n1", "nowhere"])
    assert not np.isnan(m).any()
    np.testing.assert_allclose(m[0], _row(0.3, 0.3, 0.1))
    assert np.array_equal(m[1], np.zeros(N_FEATURES))
    assert ResidentLoad().matrix(["x", "y"]).shape == (2, N_FEATURES)


NODES = ["n0", "n1", "n2"]
_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.integers(0, 5),
            st.sampled_from(NODES),
            st.lists(st.floats(0.0, 2.0, allow_nan=False), min_size=N_FEATURES, max_size=N_FEATURES),
        ),
        st.tuples(st.just("drop"), st.integers(0, 6)),
        st.tuples(st.just("keep"), st.sets(st.integers(0, 5))),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(_ops)
def test_matches_a_plain_dict_of_rows_under_any_sequence(ops: list) -> None:
    res = ResidentLoad()
    oracle: dict[int, tuple[str, np.ndarray]] = {}
    for op in ops:
        if op[0] == "add":
            _, pod, node, row = op
            res.add(pod, node, row)
            oracle[pod] = (node, np.asarray(row))
        elif op[0] == "drop":
            assert res.drop(op[1]) is (oracle.pop(op[1], None) is not None)
        else:
            res.keep_only(op[1])
            oracle = {p: v for p, v in oracle.items() if p in op[1]}
        assert len(res) == len(oracle)
        assert [res.count(n) for n in NODES] == [sum(node == n for node, _ in oracle.values()) for n in NODES]
        want = np.zeros((len(NODES), N_FEATURES))
        for node, row in oracle.values():
            want[NODES.index(node)] += row
        got = res.matrix(NODES)
        np.testing.assert_allclose(got, want, atol=1e-9)
        for i, name in enumerate(NODES):  # an empty node is exactly zero, not a rounding residue
            if not any(node == name for node, _ in oracle.values()):
                assert np.array_equal(got[i], np.zeros(N_FEATURES))


def test_an_ended_pod_fades_out_over_the_window_as_a_rate_over_it_does() -> None:
    res = ResidentLoad(window_seconds=20.0)
    res.add("ran", "n1", _row(0.4, 0.2))
    res.add("never-ran", "n1", _row(0.3))
    res.add("elsewhere", "n2", _row(0.1))
    assert res.drop("ran", ended_at=100.0)
    assert res.drop("never-ran")  # its bind failed: the metrics never saw it
    np.testing.assert_allclose(res.ended(["n1", "n2"], 100.0), [_row(0.4, 0.2), _row()])
    np.testing.assert_allclose(res.ended(["n1"], 105.0)[0], 0.75 * _row(0.4, 0.2))  # 1 - 5 / 20 still shows
    np.testing.assert_allclose(res.ended(["n1"], 115.0)[0], 0.25 * _row(0.4, 0.2))
    assert not res.ended(["n1", "n2"], 120.0).any()  # a whole window later the rate no longer holds it
    np.testing.assert_allclose(res.matrix(["n1", "n2"]), [_row(), _row(0.1)])  # the running count is unchanged


def test_a_pod_that_ended_after_the_load_was_measured_is_still_in_it_in_full() -> None:
    """The scheduler asks at its snapshot's time: a pod that ended after it shows in that load whole, not more."""
    res = ResidentLoad(window_seconds=20.0)
    res.add("a", "n1", _row(0.4))
    res.add("b", "n1", _row(0.2))
    res.drop("a", ended_at=100.0)
    res.drop("b", ended_at=110.0)
    np.testing.assert_allclose(res.ended(["n1"], 95.0)[0], _row(0.4) + _row(0.2))  # both still ran at 95
    np.testing.assert_allclose(res.ended(["n1"], 105.0)[0], 0.75 * _row(0.4) + _row(0.2))


def test_without_a_window_nothing_is_remembered_and_clear_forgets_the_ended() -> None:
    res = ResidentLoad()
    res.add("a", "n1", _row(0.5))
    res.drop("a", ended_at=10.0)
    assert not res.ended(["n1"], 10.0).any()
    res = ResidentLoad(window_seconds=30.0)
    res.add("a", "n1", _row(0.5))
    res.drop("a", ended_at=10.0)
    res.clear()
    assert not res.ended(["n1"], 11.0).any()
