"""Scheduling throughput and queue-to-bind latency against the real kube-apiserver.

Runs drs-prom's scheduler (``drs-prom run`` as its own process, like in a cluster) and
the real kube-scheduler on the same control plane (tests/k8s harness), at 5 and 100
fake nodes, and prints pods/s and p50/p99 latency from pod creation (the create call
returning) to the bind being visible in a watch. Numbers are printed, never asserted.

    /tmp/warmvenv/bin/python benchmarks/sched_throughput.py [--pods 300] [--nodes 5,100] [--model PATH]

There is no Prometheus in these runs, so drs-prom decides with its request-based
fallback: the runs measure the machinery (watch, queue, filter, score, bind, events).
What the model adds per pod is measured separately, in-process, at the end: one
decision (filter + state + score) with the shipped DQN vs the fallback, at 5 and 100
nodes, on a literal node snapshot.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.process import free_port

# kube-scheduler's default client rate limit (qps 50, burst 100) would cap it near 75 binds/s;
# drs-prom's client has none, so lift it for a like-for-like comparison of the schedulers.
KUBE_CFG = """
clientConnection: {{qps: 1000, burst: 1000}}
profiles:
  - schedulerName: {name}
"""


def pod(name: str, scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


class BindWatcher:
    """Watches one namespace and records when each pod is first seen with a nodeName."""

    def __init__(self, core, namespace: str) -> None:
        self.core, self.ns = core, namespace
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        rv = json.loads(self.core.list_namespaced_pod(self.ns, _preload_content=False).data)["metadata"][
            "resourceVersion"
        ]
        while not self._stop.is_set():
            resp = self.core.list_namespaced_pod(
                self.ns,
                watch=True,
                resource_version=rv,
                timeout_seconds=5,
                allow_watch_bookmarks=True,
                _preload_content=False,
            )
            buf = b""
            for chunk in resp.stream(amt=None, decode_content=False):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    ev = json.loads(line)
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                        self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
                if self._stop.is_set():
                    break

    def stop(self) -> None:
        self._stop.set()
        self._t.join(10)


def run_once(cp: ControlPlane, label: str, scheduler_name: str, n_pods: int) -> dict:
    from kubernetes import client

    core = client.CoreV1Api(cp.admin_client)
    ns = f"bench-{label}-{int(time.time())}"
    cp.create_namespace(ns)
    watcher = BindWatcher(core, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"p{i:05d}"
        core.create_namespaced_pod(ns, pod(name, scheduler_name), _preload_content=False)
        created[name] = time.monotonic()

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(create, range(n_pods)))
    t_created = time.monotonic()
    deadline = time.monotonic() + 300
    while len(watcher.bound) < n_pods and time.monotonic() < deadline:
        time.sleep(0.05)
    watcher.stop()
    lat = np.array([watcher.bound[n] - created[n] for n in created if n in watcher.bound])
    last = max(watcher.bound.values()) if watcher.bound else float("nan")
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    return {
        "label": label,
        "pods": n_pods,
        "bound": len(watcher.bound),
        "create_rate": n_pods / (t_created - t0),
        "pods_per_s": len(watcher.bound) / (last - t0) if watcher.bound else 0.0,
        "p50_ms": float(np.percentile(lat, 50) * 1000) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99) * 1000) if len(lat) else float("nan"),
    }


def drain_once(cp: ControlPlane, label: str, scheduler_name: str, n_pods: int, start) -> dict:
    """Create all pods first, then start the scheduler: its pure drain rate (first to last bind)."""
    from kubernetes import client

    core = client.CoreV1Api(cp.admin_client)
    ns = f"drain-{label}-{int(time.time())}"
    cp.create_namespace(ns)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(
            pool.map(
                lambda i: core.create_namespaced_pod(ns, pod(f"p{i:05d}", scheduler_name), _preload_content=False),
                range(n_pods),
            )
        )
    watcher = BindWatcher(core, ns)
    time.sleep(0.5)
    stop = start()
    try:
        deadline = time.monotonic() + 300
        while len(watcher.bound) < n_pods and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watcher.stop()
        stop()
    times = sorted(watcher.bound.values())
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return {"label": label, "pods": n_pods, "bound": len(times), "drain_pods_per_s": rate}


def start_drs(
    cp: ControlPlane, workdir: Path, model: str | None, name: str = "drs-scheduler"
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cfg = {
        "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 0.5},  # nothing listens: fallback
        "scheduler": {
            "metrics_listen": f"127.0.0.1:{port}",
            "leader_election": False,
            "scheduler_name": name,
            "journal_path": str(workdir / "journal.sqlite"),
            "model_path": model or str(workdir / "none.keras"),
        },
    }
    path = workdir / "drs.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(workdir / "drs.log", "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from drs_prom.cli import main; main()",
            "run",
            "--config",
            str(path),
            "--kubeconfig",
            str(cp.admin_kubeconfig),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"drs-prom run exited: {(workdir / 'drs.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except Exception:
            time.sleep(0.3)
    raise SystemExit("drs-prom run never became ready")


def decision_cost(n_nodes: int, model_path: str | None, reps: int = 300) -> dict:
    """Mean ms per decision (filter + load matrix + score) with the model and with kube-default."""
    import pandas as pd

    from drs_prom import filters
    from drs_prom.agent import load_policy
    from drs_prom.config import Settings
    from drs_prom.features import FEATURES
    from drs_prom.scheduler.decide import Decider
    from drs_prom.scheduler.metrics import SchedulerMetrics
    from drs_prom.state import NodeSnapshot
    from drs_prom.types import NodeInfo, PodRequest

    rng = np.random.default_rng(0)
    names = [f"n{i}" for i in range(n_nodes)]
    frame = pd.DataFrame(rng.uniform(0, 0.8, (n_nodes, 6)), index=names, columns=list(FEATURES))
    frame.iloc[:, 2:] *= 1e8

    class Fixed:
        def snapshot(self):
            return NodeSnapshot(features=frame, taken_at=time.time())

    nodes = [NodeInfo(name=n, allocatable_cpu_m=64000, allocatable_mem_bytes=256 << 30) for n in names]
    pod = PodRequest(name="p", cpu_m=10, mem_bytes=16 << 20)
    demand = (0.5, 2.0**30, 1e5, 1e5, 0.0, 1e6)
    out = {}
    for label, policy in (("model", load_policy(model_path)), ("fallback", None)):
        d = Decider(Settings(), SchedulerMetrics(), source=Fixed(), policy=policy)
        d.refresh()
        if policy is None:
            d.source = None  # -> prometheus_unreachable -> kube-default
        t0 = time.perf_counter()
        for _ in range(reps):
            mask = filters.feasible_mask(pod, nodes)
            d.decide(pod, demand, nodes, mask)
        out[label] = (time.perf_counter() - t0) / reps * 1000
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=300)
    ap.add_argument("--nodes", default="5,100")
    ap.add_argument("--no-drain", dest="drain", action="store_false", help="skip the queue-drain runs")
    ap.add_argument("--model", default=None, help="model file (default: the shipped models/drs-v1.keras)")
    args = ap.parse_args()
    results: list[dict] = []
    drains: list[dict] = []
    with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
        from kubernetes import client

        core = client.CoreV1Api(cp.admin_client)
        drs, drs_url = start_drs(cp, Path(tmp), args.model or str(REPO / "models" / "drs-v1.keras"))
        kube = cp.start_kube_scheduler(KUBE_CFG.format(name="bench-kube"))
        try:
            for n in (int(x) for x in args.nodes.split(",")):
                names = [f"bn-{n}-{i}" for i in range(n)]
                for name in names:
                    cp.create_fake_node(name, cpu="64", memory="256Gi", pods="500")
                time.sleep(1.0)
                results.append({"nodes": n, **run_once(cp, f"drs-{n}", "drs-scheduler", args.pods)})
                results.append({"nodes": n, **run_once(cp, f"kube-{n}", "bench-kube", args.pods)})
                if args.drain:

                    def drs_start():
                        d, _ = start_drs(
                            cp, Path(tmp), args.model or str(REPO / "models" / "drs-v1.keras"), name="drain-drs"
                        )
                        return lambda: (d.terminate(), d.wait(20))

                    def kube_start():
                        k = cp.start_kube_scheduler(KUBE_CFG.format(name="drain-kube"))
                        return k.stop

                    drains.append({"nodes": n, **drain_once(cp, f"drs-{n}", "drain-drs", args.pods, drs_start)})
                    drains.append({"nodes": n, **drain_once(cp, f"kube-{n}", "drain-kube", args.pods, kube_start)})
                for name in names:
                    core.delete_node(name)
            with urllib.request.urlopen(drs_url + "/metrics", timeout=5) as r:
                own = {
                    ln.split()[0]: float(ln.split()[1])
                    for ln in r.read().decode().splitlines()
                    if ln and not ln.startswith("#") and len(ln.split()) == 2
                }
            att_n = own.get("drs_scheduling_attempt_seconds_count", 0)
            if att_n:
                print(
                    f"drs-prom scheduling cycle (filter+score, no bind): mean "
                    f"{own['drs_scheduling_attempt_seconds_sum'] / att_n * 1000:.2f} ms over {att_n:.0f} attempts"
                )
        finally:
            drs.terminate()
            drs.wait(20)
            kube.stop()
    print(
        f"\n{'scheduler':<16}{'nodes':>6}{'pods':>6}{'bound':>6}{'create/s':>10}{'pods/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
    )
    for r in results:
        print(
            f"{r['label']:<16}{r['nodes']:>6}{r['pods']:>6}{r['bound']:>6}{r['create_rate']:>10.1f}{r['pods_per_s']:>9.1f}"
            f"{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
        )
    if drains:
        print("\nqueue drain (all pods pending before the scheduler starts; first to last bind):")
        for r in drains:
            print(f"{r['label']:<16}{r['nodes']:>6}{r['pods']:>6}{r['bound']:>6}{r['drain_pods_per_s']:>10.1f} pods/s")
    by = {(r["label"].split("-")[0], r["nodes"]): r for r in results}
    for n in sorted({r["nodes"] for r in results}):
        d, k = by[("drs", n)], by[("kube", n)]
        print(
            f"{n} nodes: drs-prom/kube-scheduler throughput ratio {d['pods_per_s'] / k['pods_per_s']:.2f}, "
            f"p50 latency ratio {d['p50_ms'] / k['p50_ms']:.2f}"
        )
    print("\nper-decision cost in-process (filter + state + score), shipped model vs kube-default fallback:")
    for n in sorted({r["nodes"] for r in results}):
        c = decision_cost(n, args.model)
        print(
            f"{n:>4} nodes: model {c['model']:.2f} ms, fallback {c['fallback']:.2f} ms, ratio {c['model'] / c['fallback']:.2f}"
        )


if __name__ == "__main__":
    main()
