"""The testbed's pods as a real cluster's: the testbed's Prometheus holds the twin kubelets' cAdvisor series of
every running pod (with kube-prometheus-stack's kubelet labels, at the pod's simulated usage), and no pod says its
usage unless the run is told (``--told-usage``); a run that was not told fails when a pod carried a usage annotation.

Short runs of the real kube-scheduler on drs-paper with two of its applications run by Deployments (pods named and
owned by ReplicaSets) and one by a Job. While a run goes on, a probe (the fault-script hook) follows the simulator's
per-pod counters and reads Prometheus: a pod that has been scraped for a rate window is compared, rate for rate,
with what the simulator counted over the same samples; another reads, with the live scheduler's own reader and
queries, the stored usage of a Deployment's pods once one has ended (by owner, by image, and by image less the
owner's own pods). Waits are bounded polls; every process a run starts is
stopped by it, and the control plane by the fixture.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from drs_prom.config import PrometheusSettings, UsageSettings
from drs_prom.signals.pod_usage import IMAGE, OWNER, PrometheusUsageHistory
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.sim.scenario import Scenario, load_scenario
from drs_prom.sim.workload import BACKGROUND_PROFILE, PROFILE_LABEL
from drs_prom.testbed import judge, process
from drs_prom.testbed.cadvisor import PAUSE_IMAGE
from drs_prom.testbed.closed_loop import RunConfig, RunContext, workload_for
from drs_prom.testbed.closed_loop import Testbed as ClosedLoop  # not Test*: pytest would try to collect it
from drs_prom.testbed.driver import UsageLeak

pytestmark = pytest.mark.integration

WINDOW = 3.0
"""Rate window (wall seconds): six scrapes at 0.5 s."""
CPU = '{{namespace="{ns}",pod="{pod}",container!="",container!="POD"}}'


def deployed() -> Scenario:
    """drs-paper with video and net run by two Deployments each; disk stays one Job."""
    sc = load_scenario("drs-paper")
    profiles = sc.model_dump()["profiles"]
    for name in ("video", "net"):
        profiles[name]["owners"] = {"count": 2}
    return sc.with_changes(profiles=profiles)


@pytest.fixture(scope="module")
def testbed(k8s_bins, tmp_path_factory) -> Iterator[ClosedLoop]:
    running = process.live_processes()  # e.g. the suite's shared control plane: not ours to stop
    tb = ClosedLoop(
        deployed(), tmp_path_factory.mktemp("usage-testbed"), RunConfig(speed=5.0, scrape_seconds=0.5), print
    )
    try:
        tb.start()
        yield tb
    finally:
        tb.stop()
    assert process.live_processes() == running


def _poll(fn: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


class Counters:
    """The simulator's per-pod counters (LiveCluster.pod_counters), sampled every poll: what the pages served."""

    def __init__(self, ctx: RunContext) -> None:
        self.live = ctx.live
        self.t: list[float] = []
        self.values: list[dict[str, np.ndarray]] = []

    def sample(self) -> dict[str, np.ndarray]:
        now = {p: v for i in range(len(self.live.nodes)) for p, v in self.live.pod_counters(i).items()}
        self.t.append(time.time())  # the testbed's LiveCluster runs on time.time, as Prometheus' timestamps
        self.values.append(now)
        return now

    def rate(self, pod: str, feature: int, t0: float, t1: float) -> float:
        """The pod's mean usage over [t0, t1] as the simulator counted it (counters interpolated between samples)."""
        seen = [(t, v[pod][feature]) for t, v in zip(self.t, self.values) if pod in v]
        ts, vs = np.array([t for t, _ in seen]), np.array([v for _, v in seen])
        assert ts[0] <= t0 and t1 <= ts[-1], "the pod was not followed over the whole window"
        return float((np.interp(t1, ts, vs) - np.interp(t0, ts, vs)) / (t1 - t0))


def cadvisor_probe(ctx: RunContext) -> dict[str, Any]:
    """A pod scraped running for a rate window: its series, labels and rates; then its series ending with it."""
    try:
        return _probe(ctx)
    except Exception:
        return {"error": traceback.format_exc()}


def _probe(ctx: RunContext) -> dict[str, Any]:
    prom, ns, counters = ctx.prom, ctx.namespace, Counters(ctx)
    samples = f"count_over_time(container_cpu_usage_seconds_total{CPU}[{WINDOW:g}s])"

    def scraped_long_enough() -> str | None:
        running = counters.sample()
        for pod in running:
            seen = [t for t, v in zip(counters.t, counters.values) if pod in v]
            if seen[-1] - seen[0] < WINDOW + 1.0:
                continue
            got = prom.query(samples.format(ns=ns, pod=pod))
            if got and float(got[0]["value"][1]) >= WINDOW / 0.5 - 1:  # five or six scrapes in the window
                return pod
        return None

    pod = _poll(scraped_long_enough, 90, "a pod scraped running for a rate window")
    at = time.time()
    counters.sample()  # the simulator's counters followed past the instant Prometheus is asked at
    window = f"{WINDOW:g}s"
    container = prom.query(f"container_cpu_usage_seconds_total{CPU.format(ns=ns, pod=pod)}", at=at)
    network = prom.query(f'container_network_receive_bytes_total{{namespace="{ns}",pod="{pod}"}}', at=at)
    memory = prom.query(f'container_memory_working_set_bytes{{namespace="{ns}",pod="{pod}",container="work"}}', at=at)
    raw = prom.query(f"container_cpu_usage_seconds_total{CPU.format(ns=ns, pod=pod)}[{window}]", at=at)
    t0, t1 = float(raw[0]["values"][0][0]), float(raw[0]["values"][-1][0])
    rates = {}
    for key, feature, expr in (
        (
            "cpu",
            0,
            f"sum by (pod) (rate(container_cpu_usage_seconds_total{{container!='',container!='POD'}}[{window}]))",
        ),
        ("net_rx", 2, f"sum by (pod) (rate(container_network_receive_bytes_total[{window}]))"),
        ("net_tx", 3, f"sum by (pod) (rate(container_network_transmit_bytes_total[{window}]))"),
        ("disk_write", 5, f"sum by (pod) (rate(container_fs_writes_bytes_total{{container!=''}}[{window}]))"),
    ):
        got = {r["metric"]["pod"]: float(r["value"][1]) for r in prom.query(expr, at=at)}
        rates[key] = (got.get(pod), counters.rate(pod, feature, t0, t1))
    cgroup = prom.query(f'container_cpu_usage_seconds_total{{namespace="{ns}",pod="{pod}",container=""}}', at=at)
    # the pod ends: its series leave the page (stale in Prometheus at the next scrape), its history stays
    _poll(lambda: pod not in counters.sample(), 120, f"{pod} to end")
    now = f'container_cpu_usage_seconds_total{{namespace="{ns}",pod="{pod}"}}'
    _poll(lambda: not prom.query(now), 10, f"{pod}'s series to go stale")
    kept = prom.query(
        f'last_over_time(container_cpu_usage_seconds_total{{namespace="{ns}",pod="{pod}",container="work"}}[5m])'
    )
    return {
        "pod": pod,
        "node": ctx.kubelet.stats.bound_node.get(pod),
        "image": ctx.owners.of(ctx.owners.rows()[pod]).image,
        "demand": ctx.kubelet.truth[pod][0],
        "container": [r["metric"] for r in container],
        "network": [r["metric"] for r in network],
        "memory": [float(r["value"][1]) for r in memory],
        "cgroup": len(cgroup),
        "rates": rates,
        "kept": len(kept),
    }


def test_prometheus_holds_the_cadvisor_series_of_running_pods(testbed):
    wl = workload_for(testbed.scenario, 0, 8)
    running = process.live_processes()
    r = testbed.run_one("kube-scheduler", 0, wl, fault_script=cadvisor_probe)
    assert process.live_processes() == running  # the run stopped its Prometheus and scheduler
    probe = r["faults"]
    assert "error" not in probe, probe.get("error")
    print("\n", {k: v for k, v in probe.items() if k not in ("container", "network")})
    assert (r["bound"], r["completed"], r["lost"], r["infeasible"]) == (8, 8, 0, 0)
    assert r["information"] == "estimated" and r["usage_annotated"] == 0  # no pod said its usage
    kubelet = {"job": "kubelet", "metrics_path": "/metrics/cadvisor", "node": probe["node"], "instance": probe["node"]}
    pod = {"namespace": r["namespace"], "pod": probe["pod"]}
    [container] = probe["container"]  # the one container (the pod's cgroup and its sandbox are left out)
    assert container == {"__name__": "container_cpu_usage_seconds_total", **kubelet, **pod} | {
        "container": "work",
        "image": probe["image"],
    }
    [network] = probe["network"]
    assert network == {"__name__": "container_network_receive_bytes_total", **kubelet, **pod} | {
        "container": "POD",
        "image": PAUSE_IMAGE,
        "interface": "eth0",
    }
    assert probe["cgroup"] == 1  # cAdvisor's pod-level series (container="") is there too, for queries to leave out
    assert probe["memory"] == [pytest.approx(probe["demand"][1])]  # memory is held at its demand
    for key, (promql, simulated) in probe["rates"].items():
        assert promql is not None, key
        assert promql == pytest.approx(simulated, rel=0.1, abs=1.0 if key != "cpu" else 0.01), key
    cpu = probe["rates"]["cpu"][1]
    assert 0 < cpu <= probe["demand"][0] * 1.001  # the simulator's use of the pod: its demand, less if contended
    assert probe["kept"] == 1  # the ended pod's history stays in Prometheus


def estimator_probe(ctx: RunContext) -> dict[str, Any]:
    """What the live scheduler's estimator reads of a Deployment's pods from this Prometheus, once one has ended."""
    try:
        return _estimator_probe(ctx)
    except Exception:
        return {"error": traceback.format_exc()}


def _estimator_probe(ctx: RunContext) -> dict[str, Any]:
    counters, rows = Counters(ctx), ctx.owners.rows()
    seen: set[str] = set()

    def an_ended_deployment_pod() -> str | None:
        running = counters.sample()
        seen.update(running)
        ended = [p for p in seen - set(running) if ctx.owners.of(rows[p]).owner.startswith("Deployment/")]
        return ended[0] if ended else None

    pod = _poll(an_ended_deployment_pod, 120, "a Deployment's pod to run and end")
    controller = ctx.owners.of(rows[pod])
    source = PrometheusSource(PrometheusSettings(url=ctx.prom.url, timeout_seconds=10.0))
    history = PrometheusUsageHistory(source, UsageSettings())  # the scheduler's own reader and queries
    owner_key = (OWNER, ctx.namespace, controller.owner, "")
    image_key = (IMAGE, ctx.namespace, "", controller.image)  # any owner's pods that ran the image
    others_key = (IMAGE, ctx.namespace, controller.owner, controller.image)  # the owner's own pods left out

    def matched(key: tuple[str, str, str, str]) -> set[str]:
        return {labels["pod"] for labels, _ in history.series([key])[key]}

    try:
        # the rules' series of the ended pod follow its cAdvisor series by an evaluation: read until it is there
        def with_pod() -> set[str] | None:
            got = matched(owner_key)
            return got if pod in got else None

        names = _poll(with_pod, 30, f"{pod} in {controller.owner}")
        owner = history.read(owner_key)
        return {
            "pod": pod,
            "owner": controller.owner,
            "names": sorted(names),
            "members": sorted(p for p, i in rows.items() if ctx.owners.of(i).owner == controller.owner),
            "demand": ctx.kubelet.truth[pod][0],
            "mean": owner.mean.tolist(),
            "seconds": owner.seconds.tolist(),
            "image": sorted(matched(image_key)),
            "others": sorted(matched(others_key)),
            "read": len(owner),
        }
    finally:
        source.close()


def annotate_one(ctx: RunContext) -> dict[str, Any]:
    """What a run that was not told must catch: a pod of its own that carries a usage annotation all the same."""
    from kubernetes import client

    name = _poll(lambda: next(iter(ctx.driver.result.created), None), 60, "the driver's first pod")
    body = {"metadata": {"annotations": {"drs.io/demand": "cpu=1"}}}
    client.CoreV1Api(ctx.testbed.api).patch_namespaced_pod(name, ctx.namespace, body)
    return {"annotated": name}


def test_pods_say_their_usage_only_when_told_and_a_leak_fails_the_run(testbed):
    wl = workload_for(testbed.scenario, 1, 3)
    with pytest.raises(UsageLeak, match="was not told the pods' usage, yet 1 of the 3 pods"):
        testbed.run_one("kube-scheduler", 1, wl, fault_script=annotate_one)
    testbed.config.told_usage = True
    try:
        told = testbed.run_one("kube-scheduler", 1, wl)
    finally:
        testbed.config.told_usage = False
    assert told["information"] == "told"
    assert (told["completed"], told["usage_annotated"]) == (3, 3)  # every pod carried drs.io/demand


def test_the_estimators_queries_read_a_deployments_pods_from_the_testbeds_prometheus(testbed):
    wl = workload_for(testbed.scenario, 2, 12)
    r = testbed.run_one("kube-scheduler", 2, wl, fault_script=estimator_probe)
    probe = r["faults"]
    assert "error" not in probe, probe.get("error")
    print("\n", probe)
    names, members = set(probe["names"]), set(probe["members"])
    assert probe["pod"] in names <= members  # the owner's pods by name: the ended one among them, no other owner's
    assert 1 <= probe["read"] <= len(names)  # a row per pod seen long enough for a duration
    cpu, memory = probe["demand"][0], probe["demand"][1]
    rows = [m for m in probe["mean"] if m[1] == pytest.approx(memory, rel=1e-3)]
    assert rows, (probe["mean"], memory)  # the ended pod's row: memory held at its demand
    assert all(0 < m[0] <= cpu * 1.05 for m in rows)  # cpu at its demand, less if contended
    assert all(s > 0 for s in probe["seconds"])
    image, others = set(probe["image"]), set(probe["others"])
    assert names <= image  # by image: the owner's pods and any other owner's that ran it
    assert others <= image and not others & members  # similar pods: the image's, the owner's own left out


def pinned_probe(ctx: RunContext) -> dict[str, Any]:
    """Once the driver has created every pod: each pod's node and profile as the apiserver lists them."""
    try:
        _poll(lambda: not ctx.driver.is_alive(), 120, "the driver to create every pod")
        pods = judge.list_pods(ctx.testbed.api, ctx.namespace)
        return {
            p["metadata"]["name"]: [p["spec"].get("nodeName"), p["metadata"]["labels"].get(PROFILE_LABEL)] for p in pods
        }
    except Exception:
        return {"error": traceback.format_exc()}


def test_background_load_runs_on_its_node_and_is_not_judged_as_the_schedulers(testbed):
    """A scenario's background pods (a noisy neighbour's load, pinned in the simulator) are created bound to their
    node: kube-scheduler never places them, the twin kubelet runs them, and the run's pods are the scheduler's."""
    host = testbed.nodes.names[-1]
    demand = {"cpu_cores": 0.5, "mem_bytes": 2**28}
    sc = testbed.scenario.with_changes(
        background=[{"node": host, "rate_per_second": 0.5, "work_seconds": 6, "demand": demand}]
    )
    wl = workload_for(sc, 3, 6)
    placed = int(wl.scheduled.sum())
    assert placed == 6 and len(wl) > placed  # background pods arrive while the six run
    r = testbed.run_one("kube-scheduler", 3, wl, fault_script=pinned_probe)
    seen = r["faults"]
    assert "error" not in seen, seen.get("error")
    background = {name: node for name, (node, profile) in seen.items() if profile == BACKGROUND_PROFILE}
    assert len(background) == len(wl) - placed and set(background.values()) == {host}
    assert (r["pods"], r["bound"], r["completed"], r["lost"]) == (placed, placed, placed, 0)  # pinned ones ended too
