"""The fill protocol (drs_prom.sim.fill): the sequence, the placements, the curve, on a small openb-format trace."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.registry import DEVICE_HEURISTICS, make_policy
from drs_prom.sim.bench_command import TraceOptions
from drs_prom.sim.fill import run_fill, run_fills
from drs_prom.sim.fill_report import FillReport, format_fill, write_fill
from drs_prom.sim.fill_sequence import FillSpec, fill_pods
from drs_prom.sim.scenario import GPU_RESOURCE
from tests.sim.test_replay import openb
from tests.specs import SPEC

MIB = 2**20


def small_trace(tmp: Path) -> Path:
    """Two 4-GPU V100 nodes, a 2-GPU T4 node and a CPU-only node (10 GPUs); 14 pods, 13 GPUs among those that fit (three
    ask for half of one), one of them only on a V100, one never scheduled (kept: a shape is a shape), one asking for
    8 GPUs (fits no node: dropped)."""
    nodes = ["g0,16000,65536,4,V100", "g1,16000,65536,4,V100", "t0,8000,32768,2,T4", "c0,16000,65536,0,"]
    pods = [
        "a0,2000,4096,1,1000,,LS,Succeeded,0,10,0",
        "a1,2000,4096,1,1000,,LS,Succeeded,1,10,1",
        "a2,4000,8192,2,1000,,LS,Succeeded,2,10,2",
        "a3,1000,2048,1,500,,LS,Running,3,10,3",
        "a4,1000,2048,1,500,,LS,Running,4,10,4",
        "a5,1000,2048,1,500,,LS,Failed,5,10,5",
        "a6,8000,16384,4,1000,,LS,Succeeded,6,10,6",
        "a7,2000,4096,1,1000,V100,LS,Succeeded,7,10,7",
        "a8,4000,4096,0,0,,BE,Succeeded,8,10,8",
        "a9,6000,8192,0,0,,BE,Succeeded,9,10,9",
        "b0,3000,8192,0,0,,BE,Succeeded,10,10,10",
        "b1,2000,2048,1,1000,,LS,Pending,11,12,",
        "b2,64000,4096,8,1000,,LS,Succeeded,12,20,12",
        "b3,1000,1024,0,0,,BE,Succeeded,13,20,13",
    ]
    return openb(tmp, nodes, pods)


def scenario(path: Path, nodes: int | None = None):
    return TraceOptions(str(path), nodes=nodes).scenario()


def test_the_sequence_stops_at_the_pod_that_reaches_the_target(tmp_path: Path) -> None:
    sc = scenario(small_trace(tmp_path))
    pods = fill_pods(sc, 0, FillSpec(target=1.5))
    s = pods.stats
    assert (s.nodes, s.capacity, s.list_pods, s.unfit, s.shared) == (4, 10.0, 14, 1, 3)
    amounts = pods.amount[pods.order]
    assert amounts.sum() >= 15 and amounts.sum() - amounts[-1] < 15  # 150 % of 10 GPUs, reached by the last pod
    assert s.arrived == pytest.approx(amounts.sum() / 10)
    assert 12 not in pods.order.tolist()  # b2 (8 GPUs) fits no node
    assert sorted(pods.order[: s.from_list].tolist()) == [i for i in range(14) if i != 12]  # the list, then more
    assert s.drawn_again == len(pods.order) - 13 > 0
    # a smaller target cuts the list itself
    half = fill_pods(sc, 0, FillSpec(target=0.5))
    assert half.amount[half.order].sum() >= 5 and half.amount[half.order][:-1].sum() < 5 and half.stats.drawn_again == 0


def test_the_same_seed_gives_the_same_sequence_and_results(tmp_path: Path) -> None:
    sc = scenario(small_trace(tmp_path))
    spec = FillSpec(target=1.3, step=0.1)
    a, b = fill_pods(sc, 3, spec), fill_pods(sc, 3, spec)
    assert a.order.tolist() == b.order.tolist() and np.array_equal(a.used, b.used)
    assert any(fill_pods(sc, s, spec).order.tolist() != a.order.tolist() for s in range(4, 8))
    for name in ("kube-default", *DEVICE_HEURISTICS, "least-loaded", "random"):
        first = run_fill(a, make_policy(name, SPEC, 3), 3)
        again = run_fill(b, make_policy(name, SPEC, 3), 3)
        assert first.curve == again.curve and (first.placed, first.failed) == (again.placed, again.failed)


@pytest.mark.parametrize("name", ["kube-default", "random", "trimaran-tlp", *DEVICE_HEURISTICS])
def test_no_pod_is_placed_where_it_does_not_fit_and_the_curve_only_grows(tmp_path: Path, name: str) -> None:
    sc = scenario(small_trace(tmp_path))
    spec = FillSpec(target=1.3, step=0.1)
    pods = fill_pods(sc, 1, spec)
    n = len(pods.nodes)
    cpu, mem, gpus = np.zeros(n), np.zeros(n), np.zeros(n)
    models = [dict(x.labels).get("gpu-model") for x in pods.nodes.infos]

    def bind(k: int, node: int) -> None:
        req = pods.requests[int(pods.order[k])]
        cpu[node] += req.cpu_m
        mem[node] += req.mem_bytes
        gpus[node] += dict(req.scalar).get(GPU_RESOURCE, 0)
        allowed = [v for t in req.affinity_terms for r in t.match_expressions for v in r.values]
        assert not allowed or models[node] in allowed

    run = run_fill(pods, make_policy(name, SPEC, 1), 1, on_bind=bind)
    assert (cpu <= pods.nodes.alloc_cpu_m).all() and (mem <= pods.nodes.alloc_mem).all()
    assert (gpus <= pods.nodes.alloc_scalar[GPU_RESOURCE]).all()
    assert run.placed + run.failed == len(pods.order) and run.placed > 0
    arrived = [p[0] for p in run.curve]
    allocated = [p[1] for p in run.curve]
    assert arrived == sorted(arrived) and allocated == sorted(allocated)
    assert all(a <= r + 1e-12 for r, a in zip(arrived, allocated)) and allocated[-1] == pytest.approx(gpus.sum() / 10)
    assert len(run.curve) == len(spec.checkpoints()) and arrived[-1] >= 1.3
    assert all(math.isnan(p[2]) or 0.0 <= p[2] <= 1.0 for p in run.curve)


def test_checkpoints_run_from_half_to_the_target_with_full_capacity_among_them() -> None:
    assert FillSpec(1.3, step=0.1).checkpoints() == (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
    assert FillSpec(1.25, step=0.1).checkpoints()[-2:] == (1.2, 1.25)
    assert FillSpec(0.4, step=0.1).checkpoints() == (0.1, 0.2, 0.3, 0.4)
    for bad in ({"target": 0}, {"target": -1}, {"target": math.nan}, {"target": 1.3, "step": 2}, {"resource": ""}):
        with pytest.raises(ConfigError):
            FillSpec(**bad)  # type: ignore[arg-type]


def test_pods_that_fit_no_sampled_node_are_dropped_and_a_missing_resource_refused(tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    one = openb(
        tmp_path / "one",
        ["g0,16000,65536,4,V100", "g1,16000,65536,4,V100", "t0,8000,32768,2,T4", "c0,16000,65536,0,"],
        ["a,1000,1024,1,1000,,LS,Succeeded,0,9,0", "t,1000,1024,1,1000,T4,LS,Succeeded,1,9,1"]
        + ["big,1000,1024,8,1000,,LS,Succeeded,2,9,2"],
    )
    pods = fill_pods(scenario(one, nodes=1), 0, FillSpec(target=1.0))  # one node: a V100 one (the largest kind)
    assert (pods.stats.nodes, pods.stats.unfit) == (1, 2) and set(pods.order.tolist()) == {0}
    path = small_trace(tmp_path)
    with pytest.raises(ConfigError, match=r"offers example\.com/foo"):
        fill_pods(scenario(path), 0, FillSpec(target=1.0, resource="example.com/foo"))
    cpu = fill_pods(scenario(path), 0, FillSpec(target=0.8, resource="cpu"))
    assert cpu.stats.capacity == 56000 and cpu.amount[cpu.order].sum() >= 0.8 * 56000


def test_the_report_ranks_the_policies_and_says_gpu_sharing_is_not_modelled(tmp_path: Path) -> None:
    sc = scenario(small_trace(tmp_path), nodes=3)  # a V100, the T4 and the CPU node; drs-original needs 4 nodes
    spec = FillSpec(target=1.3, step=0.1)
    lines: list[str] = []
    stats, runs, skipped = run_fills(
        sc, [0, 1, 2], ["kube-default", "fgd", "drs-original"], spec, echo=lines.append, progress=True
    )
    assert "drs-original" in skipped and not runs["drs-original"]
    assert len(runs["fgd"]) == 3 and lines[0].startswith("seed 0: 3 nodes, 6 nvidia.com/gpu")
    report = FillReport("small", spec, [0, 1, 2], stats, runs, skipped, "estimated")
    text = format_fill(report)
    assert "GPU sharing is not modelled: 3 of the list's pods" in text and "drs-original  skipped:" in text
    mean, low, high = report.allocated("fgd", 1.3)
    assert low <= mean <= high
    path = write_fill(report, tmp_path / "out")
    data = path.read_text()
    assert '"allocated_at_target"' in data and '"fragmentation_rate_at_target"' in data
