"""Hypothesis strategies for preemption cases: nodes full of pods of several priorities, PodDisruptionBudgets
over them, and one high-priority pod that fits nowhere until something is evicted.

Some pods hold host port 8080 or keep the preemptor's app off their node (required anti-affinity), and
some preemptors ask for that port or keep an app off theirs, so evictions resolve more than cpu.
A case is plain data; ``PreemptionOracle`` turns it into API objects. Pods get distinct start times
(kube-scheduler orders equal priorities by start time, and a pod without one counts as started now, which
makes its order arbitrary) and a zero grace period, so evicted pods disappear at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

PRIORITIES = (0, 10, 20, 30, 1000)
"""Values of the PriorityClasses the oracle creates (``drs-pre-<value>``; ``-never`` with preemptionPolicy Never)."""
APPS = ("a", "b", "c")
PORT = 8080
PREEMPTOR_APP = "x"


@dataclass(frozen=True)
class Placed:
    node: int
    cpu_m: int
    priority: int
    app: str
    start: int  # seconds before the case's reference time; distinct within a case
    port: bool = False
    anti: bool = False  # required anti-affinity (hostname) against the preemptor's app


@dataclass(frozen=True)
class Budget:
    app: str
    min_available: int


@dataclass(frozen=True)
class Preemptor:
    cpu_m: int
    priority: int
    never: bool = False
    port: bool = False
    anti: str = ""  # an app it must not share a node with (required anti-affinity on the hostname)


@dataclass(frozen=True)
class PreemptionCase:
    nodes: tuple[tuple[int, int], ...]  # (cpu millicores, max pods) per node
    pods: tuple[Placed, ...]
    budgets: tuple[Budget, ...]
    pod: Preemptor


@st.composite
def preemption_cases(draw: st.DrawFn) -> PreemptionCase:
    n_nodes = draw(st.integers(2, 4))
    nodes = tuple(
        (draw(st.sampled_from((2000, 4000))), draw(st.sampled_from((110, 110, 110, 4)))) for _ in range(n_nodes)
    )
    starts = iter(draw(st.lists(st.integers(1, 10_000), min_size=32, max_size=32, unique=True)))
    pods: list[Placed] = []
    for i, (cpu, max_pods) in enumerate(nodes):
        used, port_taken = 0, False  # one holder of the port per node, as any scheduler leaves it
        for _ in range(min(8, max_pods)):
            want = draw(st.sampled_from((250, 500, 500, 1000, 1000, 1500)))
            if used + want > cpu:
                continue
            used += want
            port = not port_taken and draw(st.integers(0, 9)) == 0
            port_taken = port_taken or port
            pods.append(
                Placed(
                    node=i,
                    cpu_m=want,
                    priority=draw(st.sampled_from(PRIORITIES)),
                    app=draw(st.sampled_from(APPS)),
                    start=next(starts),
                    port=port,
                    anti=draw(st.integers(0, 9)) == 0,
                )
            )
    budgets = tuple(
        Budget(app=app, min_available=draw(st.integers(0, 3)))
        for app in draw(st.lists(st.sampled_from(APPS), max_size=3, unique=True))
    )
    pod = Preemptor(
        cpu_m=draw(st.sampled_from((1500, 2000, 2000, 3000, 3000, 4000))),
        priority=draw(st.sampled_from((1000, 1000, 1000, 20))),
        never=draw(st.integers(0, 9)) == 0,
        port=draw(st.integers(0, 9)) == 0,
        anti=draw(st.sampled_from(("",) * 7 + APPS)),
    )
    return PreemptionCase(nodes=nodes, pods=tuple(pods), budgets=budgets, pod=pod)
