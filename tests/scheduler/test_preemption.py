"""drs_prom.constraints.preemption on literal cluster states: which nodes are candidates, which pods are reprieved, how
budgets are spent and which node kube-scheduler's ordering picks."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.constraints import chain, preemption
from drs_prom.constraints.placed import Neighbours, with_pods
from drs_prom.constraints.preemption import Budget, Candidate
from drs_prom.types import HostPort, LabelSelector, NodeInfo, PodRecord, PodRequest, Taint

CPU = 4000


def _pod(uid: str, node: str, cpu: int, prio: int, start: float = 0.0, app: str = "x", **kw) -> PodRecord:
    return PodRecord(
        uid=uid,
        name=uid,
        namespace="ns",
        node=node,
        cpu_m=cpu,
        priority=prio,
        start=start,
        labels=(("app", app),),
        **kw,
    )


def _state(placed: dict[str, list[PodRecord]], **node_kw) -> tuple[list[NodeInfo], Neighbours]:
    nodes = [
        with_pods(NodeInfo(name=n, allocatable_cpu_m=CPU, allocatable_mem_bytes=2**34, **node_kw), pods)
        for n, pods in placed.items()
    ]
    return nodes, Neighbours(pods_by_node=placed)


def _plan(pod: PodRequest, nodes, near, budgets=()) -> Candidate | None:
    return preemption.plan(pod, nodes, near, chain.filter_all(pod, nodes, near), list(budgets))


def _victims(c: Candidate | None) -> tuple[str, list[str]] | None:
    return None if c is None else (c.node, sorted(v.name for v in c.victims))


INCOMING = PodRequest(name="in", namespace="ns", uid="in", cpu_m=2000, priority=100)


def test_reprieves_the_most_important_pods_and_evicts_the_rest():
    placed = {
        "n1": [
            _pod("hi", "n1", 2000, 50, start=1),
            _pod("lo-old", "n1", 1000, 10, start=1),
            _pod("lo-new", "n1", 1000, 10, start=9),
        ]
    }
    nodes, near = _state(placed)
    # evicting the two priority-10 pods frees 2000m; the priority-50 pod is reprieved first and stays
    assert _victims(_plan(INCOMING, nodes, near)) == ("n1", ["lo-new", "lo-old"])
    small = dataclasses.replace(INCOMING, cpu_m=1000)
    # of two equal priorities the one started later goes
    assert _victims(_plan(small, nodes, near)) == ("n1", ["lo-new"])


def test_only_lower_priority_pods_are_victims():
    nodes, near = _state({"n1": [_pod("same", "n1", 4000, 100)]})
    assert _plan(INCOMING, nodes, near) is None


def test_never_policy_and_unresolvable_nodes_give_no_candidate():
    nodes, near = _state({"n1": [_pod("lo", "n1", 4000, 10)]})
    assert _plan(dataclasses.replace(INCOMING, preempts=False), nodes, near) is None
    tainted, near_t = _state({"n1": [_pod("lo", "n1", 4000, 10)]}, taints=(Taint("k", "v"),))
    assert _plan(INCOMING, tainted, near_t) is None
    # a request larger than the whole node cannot be helped by evictions
    assert _plan(dataclasses.replace(INCOMING, cpu_m=CPU + 1), nodes, near) is None


def test_host_port_conflict_is_resolved_by_evicting_the_port_holder():
    port = (HostPort(8080),)
    placed = {"n1": [_pod("holder", "n1", 100, 10, ports=port), _pod("other", "n1", 100, 10)]}
    nodes, near = _state(placed)
    pod = dataclasses.replace(INCOMING, cpu_m=100, ports=port)
    assert _victims(_plan(pod, nodes, near)) == ("n1", ["holder"])


def test_budget_violating_pods_are_reprieved_first():
    placed = {"n1": [_pod("guarded", "n1", 1000, 10, start=9, app="g"), _pod("free", "n1", 1000, 10, start=1)]}
    nodes, near = _state({"n1": [*placed["n1"], _pod("big", "n1", 2000, 500)]})
    budget = Budget("ns", LabelSelector(match_labels=(("app", "g"),)), allowed=0)
    pod = dataclasses.replace(INCOMING, cpu_m=1000)
    # without the budget the later-started "guarded" would go; with it, "free" goes instead
    assert _victims(_plan(pod, nodes, near)) == ("n1", ["guarded"])
    assert _victims(_plan(pod, nodes, near, [budget])) == ("n1", ["free"])


def test_split_by_budget_spends_allowance_in_order_and_ignores_empty_selectors():
    pods = [_pod(f"p{i}", "n1", 1, 1, app="g") for i in range(3)]
    one = Budget("ns", LabelSelector(match_labels=(("app", "g"),)), allowed=1)
    violating, ok = preemption.split_by_budget(pods, [one])
    assert [p.name for p in ok] == ["p0"] and [p.name for p in violating] == ["p1", "p2"]
    disrupted = dataclasses.replace(one, disrupted=frozenset({"p0"}))
    assert [p.name for p in preemption.split_by_budget(pods, [disrupted])[1]] == ["p0", "p1"]
    empty = Budget("ns", LabelSelector(), allowed=0)
    other_ns = dataclasses.replace(one, namespace="elsewhere", allowed=0)
    assert preemption.split_by_budget(pods, [empty, other_ns]) == ([], pods)


def test_node_choice_fewest_violations_then_lowest_priority_then_sum_then_count_then_latest_start():
    g = LabelSelector(match_labels=(("app", "g"),))
    # n1 breaks a budget, n2 does not: n2 although its victim has higher priority
    nodes, near = _state({"n1": [_pod("a", "n1", 4000, 1, app="g")], "n2": [_pod("b", "n2", 4000, 50)]})
    assert _victims(_plan(INCOMING, nodes, near, [Budget("ns", g, 0)])) == ("n2", ["b"])
    # lowest highest-victim priority
    nodes, near = _state(
        {
            "n1": [_pod("a", "n1", 4000, 20)],
            "n2": [_pod("b", "n2", 2000, 10, start=1), _pod("c", "n2", 2000, 10, start=2)],
        }
    )
    assert _victims(_plan(INCOMING, nodes, near)) == ("n2", ["c"])
    # smallest sum of priorities, then fewest victims
    nodes, near = _state(
        {"n1": [_pod("a", "n1", 1000, 10), _pod("b", "n1", 3000, 5)], "n2": [_pod("c", "n2", 4000, 10)]}
    )
    assert _victims(_plan(dataclasses.replace(INCOMING, cpu_m=4000), nodes, near)) == ("n2", ["c"])
    # everything equal: the node whose highest-priority victims started last
    nodes, near = _state({"n1": [_pod("a", "n1", 4000, 10, start=5)], "n2": [_pod("b", "n2", 4000, 10, start=7)]})
    assert _victims(_plan(INCOMING, nodes, near)) == ("n2", ["b"])


def test_ties_are_all_returned_and_protected_pods_are_never_victims():
    nodes, near = _state({"n1": [_pod("a", "n1", 4000, 10, start=5)], "n2": [_pod("b", "n2", 4000, 10, start=5)]})
    failed = chain.filter_all(INCOMING, nodes, near)
    found = preemption.find_candidates(INCOMING, nodes, near, failed, [])
    assert [c.node for c in preemption.best(found)] == ["n1", "n2"]
    only = preemption.find_candidates(INCOMING, nodes, near, failed, [], protected=frozenset({"a"}))
    assert [c.node for c in only] == ["n2"]


def test_post_eviction_state_passes_every_filter_including_anti_affinity():
    from drs_prom.types import PodAffinityTerm

    term = PodAffinityTerm(LabelSelector(match_labels=(("app", "web"),)), "kubernetes.io/hostname", frozenset({"ns"}))
    placed = {"n1": [_pod("web", "n1", 100, 10, app="web")]}
    nodes, near = _state(placed, labels={"kubernetes.io/hostname": "n1"})
    pod = dataclasses.replace(INCOMING, cpu_m=100, pod_anti_affinity=(term,), labels={"app": "web"})
    assert _victims(_plan(pod, nodes, near)) == ("n1", ["web"])


# -- properties over generated states ------------------------------------------------------------------


@st.composite
def _states(draw):
    placed: dict[str, list[PodRecord]] = {}
    k = 0
    for n in range(draw(st.integers(1, 4))):
        name, used, pods = f"n{n}", 0, []
        for _ in range(draw(st.integers(0, 6))):
            cpu = draw(st.sampled_from((250, 500, 1000, 2000)))
            if used + cpu <= CPU:
                used += cpu
                k += 1
                prio, start, app = (
                    draw(st.sampled_from((0, 10, 20, 200))),
                    draw(st.integers(0, 50)),
                    draw(st.sampled_from("abc")),
                )
                pods.append(_pod(f"p{k}", name, cpu, prio, start=start, app=app))
        placed[name] = pods
    budgets = [
        Budget("ns", LabelSelector(match_labels=(("app", a),)), allowed=draw(st.integers(0, 2)))
        for a in draw(st.lists(st.sampled_from("abc"), max_size=3, unique=True))
    ]
    return placed, budgets, draw(st.sampled_from((1000, 2000, 3000, 4000)))


@settings(max_examples=300, deadline=None)
@given(_states())
def test_choice_passes_every_filter_after_eviction_and_breaks_no_avoidable_budget(state):
    placed, budgets, cpu = state
    nodes, near = _state(placed)
    pod = dataclasses.replace(INCOMING, cpu_m=cpu)
    found = preemption.find_candidates(pod, nodes, near, chain.filter_all(pod, nodes, near), budgets)
    chosen = preemption.best(found)
    if not found:
        return
    pick = chosen[0]
    assert all(v.priority < pod.priority for v in pick.victims)
    if any(c.violations == 0 for c in found):
        assert pick.violations == 0
    gone = {v.uid for v in pick.victims}
    after = {n: [p for p in ps if p.uid not in gone] for n, ps in placed.items()}
    nodes_after, near_after = _state(after)
    index = [n.name for n in nodes_after].index(pick.node)
    assert not chain.filter_all(pod, nodes_after, near_after).reasons[index]
