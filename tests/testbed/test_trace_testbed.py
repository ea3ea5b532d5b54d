"""`testbed --trace`: a replayed trace on the real kube-apiserver and kube-scheduler (its default profile and a GPU
cluster's MostAllocated one), one control plane per
sampling seed, GPUs requested and offered as ``nvidia.com/gpu``.

The trace is a tiny generic-CSV directory written here: two CPU-only nodes and two GPU nodes of
different models; half the pods ask for GPUs, some for one model only. Asserted: every pod bound
and completed, none lost, bound twice or refused by the twin kubelet, and every GPU pod on a node
that offers GPUs (read back from the apiserver's pods and nodes, not from a scheduler's filters);
the pure parts (the Pod spec's constraints, the misplacement check) beside it.
"""

from pathlib import Path

import numpy as np
import pytest

from drs_prom.errors import ConfigError
from drs_prom.sim.cluster import Nodes
from drs_prom.sim.scenario import GPU_MODEL_LABEL, GPU_RESOURCE, Scenario
from drs_prom.sim.workload import generate
from drs_prom.testbed import judge, process
from drs_prom.testbed.api import cluster_stages, run_testbed
from drs_prom.testbed.driver import pod_manifest

NODES = """name,cpu,memory,gpu,labels
cpu-a,8,32Gi,0,
cpu-b,4,16Gi,0,
gpu-a100,16,64Gi,2,gpu-model=A100
gpu-v100,16,64Gi,4,gpu-model=V100
"""


def _write_trace(root: Path, pods: int = 12) -> Path:
    root.mkdir()
    (root / "nodes.csv").write_text(NODES)
    rows = ["name,arrival,duration,cpu,memory,gpu,gpu_models"]
    for i in range(pods):
        gpu = (0, 1, 0, 2)[i % 4]
        models = "A100" if i % 4 == 1 else ""
        rows.append(f"job-{i},{2 * i},{10 + i},1,2Gi,{gpu},{models}")
    (root / "pods.csv").write_text("\n".join(rows) + "\n")
    return root


def _scenario(trace: Path, **spec: object) -> Scenario:
    return Scenario.model_validate({"name": "tiny-trace", "trace": {"path": str(trace), **spec}})


def test_gpu_pods_ask_for_whole_gpus_and_their_model_as_required_node_affinity(tmp_path):
    sc = _scenario(_write_trace(tmp_path / "trace"))
    [(concrete, seeds)] = cluster_stages(sc, [3], lambda _line: None)
    assert seeds == [3]
    wl = generate(concrete, 3)
    bodies = {wl.names[i]: pod_manifest(wl, i, "ns", "default-scheduler", "run", {}) for i in range(len(wl))}
    spec1 = bodies["job-1"]["spec"]
    assert spec1["containers"][0]["resources"]["limits"] == {GPU_RESOURCE: "1"}
    terms = spec1["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": ["A100"]}]}]
    spec3 = bodies["job-3"]["spec"]
    assert spec3["containers"][0]["resources"]["limits"] == {GPU_RESOURCE: "2"} and "affinity" not in spec3
    spec0 = bodies["job-0"]["spec"]
    assert "limits" not in spec0["containers"][0]["resources"] and "affinity" not in spec0


def test_each_sampling_seed_gets_its_own_nodes(tmp_path):
    sc = _scenario(_write_trace(tmp_path / "trace"), nodes=3)
    lines: list[str] = []
    stages = cluster_stages(sc, [0, 1, 2, 3], lines.append)
    assert [seeds for _, seeds in stages] == [[0], [1], [2], [3]]
    assert all(stage.n_nodes == 3 for stage, _ in stages)
    assert len({tuple(stage.hostnames()) for stage, _ in stages}) > 1  # the samples differ across seeds
    assert len(lines) == 4 and lines[0].startswith("seed 0: 3 nodes")


def test_misplaced_extended_requests_are_read_from_pod_specs_and_node_allocatable(tmp_path):
    sc = _scenario(_write_trace(tmp_path / "trace"))
    [(concrete, _)] = cluster_stages(sc, [0], lambda _line: None)
    nodes = Nodes.from_scenario(concrete)
    cpu_node = next(n for i, n in enumerate(nodes.names) if not nodes.alloc_scalar[GPU_RESOURCE][i])
    gpu_node = next(n for i, n in enumerate(nodes.names) if nodes.alloc_scalar[GPU_RESOURCE][i] >= 2)

    def pod(name: str, node: str, gpus: int) -> dict:
        limits = {GPU_RESOURCE: str(gpus)} if gpus else {}
        return {
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": "1"}, "limits": limits}}]},
        }

    pods = [pod("ok-gpu", gpu_node, 2), pod("ok-cpu", cpu_node, 0), pod("bad", cpu_node, 1), pod("big", gpu_node, 9)]
    assert judge.extended_misplaced(pods, nodes) == ["bad", "big"]


def test_trace_refuses_node_scaling_and_faults(tmp_path):
    sc = _scenario(_write_trace(tmp_path / "trace"))
    with pytest.raises(ConfigError, match="--trace-nodes"):
        run_testbed(sc, [0], None, 10.0, ["kube-scheduler"], tmp_path / "out", nodes_scale=2, bench=False)
    with pytest.raises(ConfigError, match="does not replay a trace"):
        run_testbed(sc, [0], None, 10.0, ["kube-scheduler"], tmp_path / "out", faults=True, bench=False)


@pytest.mark.integration
def test_testbed_replays_a_trace_with_gpus_on_the_real_scheduler(k8s_bins, tmp_path, capsys):
    sc = _scenario(_write_trace(tmp_path / "trace"))
    running = process.live_processes()
    lines: list[str] = []
    report = run_testbed(
        sc,
        seeds=[0, 1],
        pods=None,
        speed=20.0,
        schedulers=["kube-scheduler", "kube-scheduler-most-allocated", "drs"],
        out_dir=tmp_path / "out",
        workdir=tmp_path / "work",
        echo=lines.append,
    )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert report["pods_per_seed"] == [12, 12] and report["n_nodes"] == 4
    for name, row in report["schedulers"].items():
        assert (row["bound"], row["completed"]) == (24, 24), name
        assert (row["lost"], row["double_bound"], row["infeasible"]) == (0, 0, 0), name
        assert [r["seed"] for r in row["runs"]] == [0, 1], name
        assert [r["extended_misplaced"] for r in row["runs"]] == [0, 0], name
        assert all(r["nodes_with_metrics"] == 4 for r in row["runs"]), name
        # half the pods ask for GPUs (read from their specs); each one's start delay is in the run's
        assert [r["device_pods"] for r in row["runs"]] == [6, 6], name
        assert all(np.isfinite(r["device_start_delay_p95"]) for r in row["runs"]), name
    # the bench comparison replays the same trace per seed, as bench --trace does
    assert set(report["bench_agreement"]["policies"]) == {"kube-scheduler", "kube-scheduler-most-allocated", "drs"}
    assert np.isfinite(report["schedulers"]["drs"]["imbalance"])
    assert process.live_processes() == running
