"""Trace replay: readers, sampling, windows, time scaling, drawn run times, GPUs and the usage model.

Every test writes its own small files in the trace's format (openb or the generic CSV) under tmp_path.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.registry import make_policy
from drs_prom.sim.env import SchedulingEnv
from drs_prom.sim.scenario import GPU_MODEL_LABEL, GPU_RESOURCE, Scenario, parse_scenario
from drs_prom.sim.trace_formats import TraceNode, read_trace
from drs_prom.sim.trace_sample import draw_durations, materialise, sample_nodes, series_mean
from drs_prom.sim.workload import generate
from tests.specs import SPEC

NODE_HEAD = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEAD = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)


def openb(tmp: Path, nodes: list[str], pods: list[str]) -> Path:
    (tmp / "openb_node_list_all_node.csv").write_text(NODE_HEAD + "".join(n + "\n" for n in nodes))
    (tmp / "openb_pod_list_default.csv").write_text(POD_HEAD + "".join(p + "\n" for p in pods))
    return tmp


def small_openb(tmp: Path) -> Path:
    """4 CPU nodes, 2 V100 nodes (2 GPUs), 1 T4 node (1 GPU); 12 pods over 1,200 s, one still running at the end."""
    nodes = [f"n{i},8000,16384,0," for i in range(4)] + ["g0,16000,32768,2,V100", "g1,16000,32768,2,V100"]
    nodes.append("t0,16000,32768,1,T4")
    pods = []
    for i in range(10):
        t = 100 * i
        pods.append(f"p{i},2000,2048,{i % 2},1000,,LS,Succeeded,{t},{t + 300 + 10 * i},{t}")
    pods.append("pend,1000,1024,0,0,,BE,Pending,150,400,")
    pods.append("long,1000,1024,0,0,,BE,Running,950,1290,955")  # deleted at the trace's end: still running
    return openb(tmp, nodes, pods)


def spec(path: Path, **kw: object) -> Scenario:
    return Scenario.model_validate({"name": "t", "trace": {"path": str(path), **kw}})


# --- readers --------------------------------------------------------------------------------------------------
def test_openb_reader_reads_nodes_pods_and_the_censored_pod(tmp_path: Path) -> None:
    table = read_trace(small_openb(tmp_path))
    assert len(table.nodes) == 7 and len(table.pods) == 12
    g = next(n for n in table.nodes if n.name == "g0")
    assert (g.cpu_m, g.mem_bytes, g.gpus, dict(g.labels)) == (16000, 32 * 2**30, 2, {GPU_MODEL_LABEL: "V100"})
    assert next(n for n in table.nodes if n.name == "n0").labels == ()
    by = {p.name: p for p in table.pods}
    assert by["pend"].outcome == "pending"
    assert by["long"].outcome == "running" and math.isnan(by["long"].end) and by["long"].start == 955
    assert by["p3"].outcome == "done" and by["p3"].end - by["p3"].start == 330
    assert table.end == 1290 and by["p9"].outcome == "done"  # p9 ended then too, but it had Succeeded


def test_openb_gpu_share_and_spec_are_read(tmp_path: Path) -> None:
    path = openb(
        tmp_path,
        ["g0,16000,32768,2,V100"],
        ["a,1000,1024,1,250,V100|T4,LS,Succeeded,0,10,0", "b,1000,1024,2,1000,nan,LS,Succeeded,0,10,0"],
    )
    a, b = read_trace(path).pods
    assert a.gpus == 0.25 and a.gpu_models == ("T4", "V100")
    assert b.gpus == 2 and b.gpu_models == ()


def test_bad_openb_rows_fail_with_one_line_naming_the_row(tmp_path: Path) -> None:
    path = openb(tmp_path, ["g0,16000,32768,2,V100"], ["a,lots,1024,0,0,,LS,Succeeded,0,10,0"])
    with pytest.raises(ConfigError, match=r"openb_pod_list_default.csv:2: column cpu_milli is not a number"):
        read_trace(path)
    openb(tmp_path, ["g0,16000,32768,2,V100"], ["a,1,1024,0,0,,LS,Sleeping,0,10,0"])
    with pytest.raises(ConfigError, match="unknown pod_phase 'Sleeping'"):
        read_trace(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="found neither"):
        read_trace(tmp_path / "empty")
    with pytest.raises(ConfigError, match="does not exist"):
        read_trace(tmp_path / "nowhere")


def generic(tmp: Path, nodes: str, pods: str) -> Path:
    (tmp / "nodes.csv").write_text(nodes)
    (tmp / "pods.csv").write_text(pods)
    return tmp


def test_generic_csv_reads_quantities_labels_taints_tolerations_and_usage(tmp_path: Path) -> None:
    path = generic(
        tmp_path,
        "name,cpu,memory,gpu,labels,taints\n"
        "a,4,8Gi,0,zone=x;disk=ssd,\n"
        "b,8000m,16Gi,2,zone=y,dedicated=ml:NoSchedule\n",
        "name,arrival,duration,end,cpu,memory,gpu,gpu_models,node_selector,tolerations,status,cpu_used,memory_used\n"
        "w1,0,60,,500m,1Gi,0,,zone=x,,,250m,512Mi\n"
        "w2,5,,65,1,2Gi,1,A|B,,dedicated=ml:NoSchedule,Failed,,\n"
        "w3,10,,,1,1Gi,0,,,dedicated:Exists,,,\n",
    )
    table = read_trace(path)
    a, b = table.nodes
    assert (a.cpu_m, a.mem_bytes, dict(a.labels)) == (4000, 8 * 2**30, {"zone": "x", "disk": "ssd"})
    assert (b.cpu_m, b.gpus, b.taints) == (8000, 2, (("dedicated", "ml", "NoSchedule"),))
    w1, w2, w3 = table.pods
    assert (w1.end, w1.cpu_m, w1.cpu_used, w1.mem_used, w1.node_selector) == (60, 500, 0.25, 2**29, (("zone", "x"),))
    assert (w2.end, w2.outcome, w2.gpu_models, w2.tolerations) == (
        65,
        "failed",
        ("A", "B"),
        (("dedicated", "Equal", "ml", "NoSchedule"),),
    )
    assert w3.outcome == "running" and math.isnan(w3.end) and w3.tolerations == (("dedicated", "Exists", "", ""),)
    assert table.end == 65


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        ("name,arrival,cpu,memory\nw,0,1,1Gi\n", "needs a duration or an end column"),
        ("name,arrival,duration,cpu,memory\nw,0,10,1,lots\n", r"pods.csv:2: column memory: not a quantity"),
        ("name,arrival,end,cpu,memory\nw,10,5,1,1Gi\n", "ends before it arrives"),
        ("name,arrival,duration,cpu,memory,status\nw,0,,1,1Gi,Succeeded\n", "status Succeeded needs a duration"),
        ("name,arrival,duration,cpu,memory,tolerations\nw,0,1,1,1Gi,k=v:Sometimes\n", "unknown effect 'Sometimes'"),
        ("name,arrival,duration,cpu,memory,cpu_used_series\nw,0,9,1,1Gi,0:1;5\n", "column cpu_used_series: '5' is not"),
        ("name,arrival,duration,cpu,memory,memory_used_series\nw,0,9,1,1Gi,0:1Gi;-2:1Gi\n", "'-2:1Gi' is not"),
        ("name,arrival,duration,cpu,memory,cpu_used_series\nw,0,9,1,1Gi,0:1;5:2;5:3\n", "offsets must increase"),
    ],
)
def test_bad_generic_rows_fail_with_one_line(tmp_path: Path, pods: str, message: str) -> None:
    generic(tmp_path, "name,cpu,memory\na,4,8Gi\n", pods)
    with pytest.raises(ConfigError, match=message):
        read_trace(tmp_path)


# --- sampling ---------------------------------------------------------------------------------------------------
def _nodes(counts: dict[int, int]) -> tuple[TraceNode, ...]:
    return tuple(TraceNode(f"k{cpu}-{i}", cpu, 2**30, 0, (), ()) for cpu, count in counts.items() for i in range(count))


def test_node_sample_is_stratified_by_kind_and_seeded() -> None:
    nodes = _nodes({1000: 50, 2000: 30, 3000: 15, 4000: 5})
    picked = sample_nodes(nodes, 20, np.random.default_rng(1))
    assert Counter(n.cpu_m for n in picked) == {1000: 10, 2000: 6, 3000: 3, 4000: 1}
    assert len({n.name for n in picked}) == 20
    again = sample_nodes(nodes, 20, np.random.default_rng(1))
    other = sample_nodes(nodes, 20, np.random.default_rng(2))
    assert [n.name for n in again] == [n.name for n in picked]
    assert [n.name for n in other] != [n.name for n in picked]
    assert sample_nodes(nodes, None, np.random.default_rng(0)) == list(nodes)


def test_largest_remainder_gives_the_leftover_nodes_to_the_largest_fractions() -> None:
    nodes = _nodes({1000: 4, 2000: 3, 3000: 3})  # shares of 5: 2.0, 1.5, 1.5
    counts = [Counter(n.cpu_m for n in sample_nodes(nodes, 5, np.random.default_rng(s))) for s in range(8)]
    assert all(c[1000] == 2 and sorted([c[2000], c[3000]]) == [1, 2] for c in counts)
    assert {c[2000] for c in counts} == {1, 2}  # the tie goes either way, by seed


def test_same_seed_same_replay_other_seed_other_nodes(tmp_path: Path) -> None:
    sc = spec(small_openb(tmp_path), nodes=4)
    a, _ = materialise(sc, 3)
    b, _ = materialise(sc, 3)
    assert a == b
    other, _ = materialise(sc, 4)
    assert other.replay != a.replay  # its own usage draws (which nodes: test_node_sample_is_stratified_...)


def test_window_takes_its_pods_and_carries_over_the_running_ones(tmp_path: Path) -> None:
    path = small_openb(tmp_path)
    # 11 pods ever ran, arrivals 0,100,...,900 and 950; 0.5:1 starts at the 6th arrival (500)
    sc, stats = materialise(spec(path, window=(0.5, 1.0), carry_over=False), 0)
    assert sc.replay is not None and sc.replay.names == ("p5", "p6", "p7", "p8", "p9", "long")
    assert sc.replay.arrival[0] == 0 and sc.replay.arrival[1] == 100
    assert stats.pending_dropped == 1 and stats.carried == 0
    # p2 (200..520), p3 (300..630), p4 (400..740) are still running at 500: they arrive at 0 with the rest of their run
    carried, stats = materialise(spec(path, window=(0.5, 1.0)), 0)
    assert carried.replay is not None and stats.carried == 3
    rows = dict(zip(carried.replay.names, zip(carried.replay.arrival, carried.replay.work, strict=True), strict=True))
    assert rows["p2"] == (0, 20) and rows["p3"] == (0, 130) and rows["p4"] == (0, 240)
    first, _ = materialise(spec(path, window=(0.0, 0.5), cut_at_window_end=False), 0)
    assert first.replay is not None and first.replay.names == ("p0", "p1", "p2", "p3", "p4")
    assert first.replay.work == (300, 310, 320, 330, 340)


def test_pods_running_at_the_windows_end_stop_there(tmp_path: Path) -> None:
    sc, _ = materialise(spec(small_openb(tmp_path), window=(0.0, 0.5)), 0)  # window 0..500
    assert sc.replay is not None
    assert sc.replay.work == (300, 310, 300, 200, 100)  # p2 arrives at 200: cut from 320 to 300


def test_compression_divides_every_time_and_load_factor_only_arrivals(tmp_path: Path) -> None:
    path = small_openb(tmp_path)
    base, _ = materialise(spec(path, cut_at_window_end=False), 0)
    fast, _ = materialise(spec(path, compression=10, cut_at_window_end=False), 0)
    dense, _ = materialise(spec(path, load_factor=4, cut_at_window_end=False), 0)
    assert base.replay and fast.replay and dense.replay
    assert np.allclose(np.array(fast.replay.arrival) * 10, base.replay.arrival)
    assert np.allclose(np.array(fast.replay.work) * 10, base.replay.work)
    assert np.allclose(np.array(dense.replay.arrival) * 4, base.replay.arrival)
    assert dense.replay.work == base.replay.work


def test_still_running_pods_get_a_finished_run_time_longer_than_their_age() -> None:
    finished = np.array([10.0, 20.0, 30.0, 400.0, 500.0])
    draws = np.concatenate([draw_durations(np.array([100.0]), finished, np.random.default_rng(s)) for s in range(40)])
    assert set(draws.tolist()) == {400.0, 500.0}
    assert draw_durations(np.array([900.0]), finished, np.random.default_rng(0)).tolist() == [900.0]


def test_the_censored_pod_of_the_trace_gets_a_drawn_run_time(tmp_path: Path) -> None:
    sc, stats = materialise(spec(small_openb(tmp_path), cut_at_window_end=False), 0)
    assert sc.replay is not None and stats.drawn_durations == 1
    # age 1290 - 955 = 335; finished run times are 300..390, so one of 340..390 is drawn
    assert sc.replay.work[sc.replay.names.index("long")] in {340 + 10 * i for i in range(6)}


# --- GPUs --------------------------------------------------------------------------------------------------------
def test_gpu_share_rounds_up_or_is_refused(tmp_path: Path) -> None:
    path = openb(tmp_path, ["g0,16000,32768,2,V100"], ["a,1000,1024,1,250,,LS,Succeeded,0,10,0"])
    sc, _ = materialise(spec(path), 0)
    assert sc.replay is not None and sc.replay.gpus == (1,)
    with pytest.raises(ConfigError, match=r"asks for 0\.25 of a GPU; GPU sharing is not modelled"):
        materialise(spec(path, gpu_sharing="refuse"), 0)


def test_pods_that_fit_no_sampled_node_are_dropped_and_counted(tmp_path: Path) -> None:
    path = openb(
        tmp_path,
        ["n0,8000,16384,0,", "g0,16000,32768,2,V100"],
        [
            "big,1000,1024,4,1000,,LS,Succeeded,0,10,0",  # 4 GPUs: no node has them
            "t4,1000,1024,1,1000,T4,LS,Succeeded,1,10,1",  # T4 only: no T4 node
            "ok,1000,1024,1,1000,V100,LS,Succeeded,2,10,2",
        ],
    )
    sc, stats = materialise(spec(path), 0)
    assert sc.replay is not None and sc.replay.names == ("ok",) and stats.unfit_dropped == 2


def test_the_simulator_never_gives_a_node_more_gpus_than_it_has(tmp_path: Path) -> None:
    """Two 2-GPU V100 nodes and one 1-GPU T4 node; 2-GPU pods that must run on V100 arrive faster than they finish:
    at most one runs per V100 node at a time, none on the T4 node, whatever the policy."""
    nodes = ["n0,64000,262144,0,", "g0,64000,262144,2,V100", "g1,64000,262144,2,V100", "t0,64000,262144,1,T4"]
    pods = [f"p{i},1000,1024,2,1000,V100,LS,Succeeded,{i},{i + 50},{i}" for i in range(12)]
    pods += [f"c{i},1000,1024,0,0,,LS,Succeeded,{i},{i + 50},{i}" for i in range(6)]
    sc, _ = materialise(spec(openb(tmp_path, nodes, pods)), 0)
    for policy in ("kube-default", "least-loaded", "random"):
        env = SchedulingEnv(sc, seed=0)
        result = env.run(make_policy(policy, SPEC, 0))
        wl, c = env.workload, env.cluster
        assert result.decisions == 18 and not np.isnan(c.finish).any()
        assert wl.scalar is not None
        gpu_pods = [i for i, asks in enumerate(wl.scalar) if dict(asks).get(GPU_RESOURCE, 0) > 0]
        hosts = {env.node_names[c.node_of[p]] for p in gpu_pods}
        assert all("v100" in h for h in hosts), hosts
        for p in gpu_pods:  # no two 2-GPU pods overlap on one node
            same = [q for q in gpu_pods if q != p and c.node_of[q] == c.node_of[p]]
            assert all(c.finish[q] <= c.start[p] + 1e-9 or c.start[q] >= c.finish[p] - 1e-9 for q in same)
        assert result.max_queue > 0  # some had to wait for a GPU


def test_gpu_models_become_node_affinity_in_the_workload(tmp_path: Path) -> None:
    path = openb(
        tmp_path, ["g0,16000,32768,2,V100", "t0,16000,32768,1,T4"], ["a,1,1,1,1000,V100|T4,LS,Succeeded,0,9,0"]
    )
    sc, _ = materialise(spec(path), 0)
    req = generate(sc, 0).pod_request(0)
    (term,) = req.affinity_terms
    (expr,) = term.match_expressions
    assert (expr.key, expr.operator, expr.values) == (GPU_MODEL_LABEL, "In", ("T4", "V100"))


# --- usage model -------------------------------------------------------------------------------------------------
def test_usage_model_draws_ratios_with_the_given_mean_and_spread(tmp_path: Path) -> None:
    pods = [f"p{i},4000,4096,0,0,,LS,Succeeded,{i},{i + 100},{i}" for i in range(3000)]
    path = openb(tmp_path, ["n0,64000,262144,0,"], pods)
    sc, _ = materialise(spec(path, usage={"cpu_ratio": 0.5, "mem_ratio": 0.8, "spread": 0.2}), 0)
    assert sc.replay is not None
    cpu = np.array(sc.replay.cpu_used) / 4.0
    mem = np.array(sc.replay.mem_used) / (4096 * 2**20)
    assert abs(cpu.mean() - 0.5) < 0.02 and abs(cpu.std() - 0.2) < 0.02
    assert abs(mem.mean() - 0.8) < 0.02 and (cpu > 1).any()  # a log-normal lets a few pods use more than asked
    flat, _ = materialise(spec(path, usage={"cpu_ratio": 0.5, "spread": 0}), 0)
    assert flat.replay is not None and set(flat.replay.cpu_used) == {2.0}


def test_the_traces_own_usage_wins_over_the_model(tmp_path: Path) -> None:
    path = generic(
        tmp_path,
        "name,cpu,memory\na,4,8Gi\n",
        "name,arrival,duration,cpu,memory,cpu_used,memory_used\nw1,0,60,2,2Gi,1.5,1Gi\nw2,1,60,2,2Gi,,\n",
    )
    sc, _ = materialise(spec(path, usage={"spread": 0}), 0)
    assert sc.replay is not None
    assert sc.replay.cpu_used == (1.5, 0.8) and sc.replay.mem_used == (2**30, 0.6 * 2 * 2**30)
    model_only, _ = materialise(spec(path, usage={"spread": 0, "from_trace": False}), 0)
    assert model_only.replay is not None and model_only.replay.cpu_used == (0.8, 0.8)


def test_usage_series_enter_as_their_time_weighted_mean_over_the_replayed_run(tmp_path: Path) -> None:
    path = generic(
        tmp_path,
        "name,cpu,memory\na,8,16Gi\n",
        "name,arrival,duration,cpu,memory,cpu_used,cpu_used_series,memory_used_series\n"
        "w1,0,300,4,4Gi,3,0:1;50:3,10:1Gi;90:3Gi\n"  # the series wins over the mean column
        "w2,0,100,4,4Gi,,,\n"  # no usage at all: the model's draw
        "late,200,100,4,4Gi,,0:1;50:3,\n",
    )
    pod = read_trace(path).pods[0]
    assert pod.cpu_series == ((0.0, 1.0), (50.0, 3.0)) and pod.mem_series == ((10.0, 2**30), (90.0, 3 * 2**30))
    sc, _ = materialise(spec(path, usage={"spread": 0}), 0)
    assert sc.replay is not None
    cpu, mem = sc.replay.cpu_used, sc.replay.mem_used
    assert cpu[0] == pytest.approx((50 * 1 + 250 * 3) / 300)
    assert mem[0] == pytest.approx((90 * 2**30 + 210 * 3 * 2**30) / 300)  # the first value also before its offset
    assert cpu[1] == pytest.approx(0.4 * 4)
    assert cpu[2] == pytest.approx((50 * 1 + 50 * 3) / 100)
    half, _ = materialise(spec(path, usage={"spread": 0}, compression=2), 0)  # the same run, in half the time
    assert half.replay is not None and half.replay.cpu_used == cpu
    cut, _ = materialise(spec(path, usage={"spread": 0}, window=(0.0, 0.9)), 0)  # w1 and w2, cut at 200 s
    assert cut.replay is not None and cut.replay.cpu_used[0] == pytest.approx((50 * 1 + 150 * 3) / 200)
    ignored, _ = materialise(spec(path, usage={"spread": 0, "from_trace": False}), 0)
    assert ignored.replay is not None and ignored.replay.cpu_used[0] == pytest.approx(0.4 * 4)


def test_series_mean_weights_each_value_by_how_long_it_holds() -> None:
    s = ((10.0, 2.0), (20.0, 4.0))
    assert series_mean(s, 0, 20) == pytest.approx(2.0)
    assert series_mean(s, 15, 25) == pytest.approx(3.0)
    assert series_mean(s, 30, 40) == pytest.approx(4.0)
    assert series_mean(s, 15, 15) == pytest.approx(2.0)
    assert math.isnan(series_mean((), 0, 1))


# --- scenario YAML ------------------------------------------------------------------------------------------------
def test_a_scenario_yaml_with_a_trace_section(tmp_path: Path) -> None:
    path = small_openb(tmp_path)
    sc = parse_scenario(f"name: mine\ntrace:\n  path: {path}\n  nodes: 3\n  window: [0.0, 0.5]\n  load_factor: 2\n")
    assert sc.trace is not None and sc.trace.nodes == 3 and not sc.nodes
    concrete, _ = materialise(sc, 0)
    assert concrete.n_nodes == 3 and concrete.n_pods == 5 and concrete.name == "mine"
    with pytest.raises(ConfigError, match=r"window 0\.5:0\.2 must satisfy"):
        parse_scenario(f"name: bad\ntrace:\n  path: {path}\n  window: [0.5, 0.2]\n")
    with pytest.raises(ConfigError, match="nodes: needs at least one entry"):
        parse_scenario("name: empty\n")


def test_generic_trace_runs_with_taints_selectors_and_tolerations(tmp_path: Path) -> None:
    """Tainted node: only tolerating pods land there; a node selector pins its pod to its zone."""
    path = generic(
        tmp_path,
        "name,cpu,memory,labels,taints\na,8,32Gi,zone=x,\nb,8,32Gi,zone=y,\nc,8,32Gi,zone=y,dedicated=ml:NoSchedule\n",
        "name,arrival,duration,cpu,memory,node_selector,tolerations\n"
        + "".join(f"free{i},{i},30,1,1Gi,,\n" for i in range(8))
        + "".join(f"ml{i},{i},30,1,1Gi,,dedicated=ml:NoSchedule\n" for i in range(8))
        + "".join(f"x{i},{i},30,1,1Gi,zone=x,\n" for i in range(4)),
    )
    sc, _ = materialise(spec(path), 0)
    assert sorted(t.name for t in sc.nodes) == ["cpu-8c-32g", "cpu-8c-32g-2", "cpu-8c-32g-3"]
    env = SchedulingEnv(sc, seed=0)
    env.run(make_policy("least-loaded", SPEC, 0))
    wl, c = env.workload, env.cluster
    tainted = next(i for i, labels in enumerate(env.nodes.labels) if env.nodes.taints[i])
    zone_x = next(i for i, labels in enumerate(env.nodes.labels) if labels.get("zone") == "x")
    on = {name: int(c.node_of[i]) for i, name in enumerate(wl.names)}
    assert all(on[f"free{i}"] != tainted for i in range(8))
    assert all(on[f"x{i}"] == zone_x for i in range(4))
    assert any(on[f"ml{i}"] == tainted for i in range(8))  # least-loaded spreads them onto the empty tainted node


def test_max_pods_and_truncation_keep_the_first_pods(tmp_path: Path) -> None:
    path = small_openb(tmp_path)
    capped, stats = materialise(spec(path, max_pods=4), 0)
    assert capped.replay is not None and capped.replay.names == ("p0", "p1", "p2", "p3") and stats.pods == 4
    full, _ = materialise(spec(path), 0)
    cut = full.truncated(3)
    assert cut.n_pods == 3 and cut.replay is not None and cut.replay.names == ("p0", "p1", "p2")
    assert len(generate(cut, 0)) == 3
