"""Scheduling throughput and create-to-bind latency against the real kube-apiserver.

Runs drs-prom's scheduler (``drs-prom run`` as its own process, like in a cluster) and
the real kube-scheduler on the same control plane (tests/k8s harness), side by side in
one invocation, at each node count of ``--nodes`` (fake nodes), and prints per scheduler:

- pods/s while pods are being created, and p50/p99 from the create call returning to the
  bind being visible in a watch;
- queue drain: all pods pending before a fresh scheduler starts, first to last bind;
- RSS (MiB) and CPU seconds per 1000 pods bound (the scheduler process only);
- the ratios drs-prom / kube-scheduler.

With ``--prometheus`` (the path users deploy) a real Prometheus scrapes a simulated
cluster of the same size and node names (``drs-prom sim-serve --mode paths``, replaying
an episode of DRS's applications), and drs-prom decides with the shipped model on fresh
state; the run checks that no decision fell back. Without it drs-prom has no metrics and
decides with its request-based fallback (the machinery alone).

kube-scheduler runs with its client rate limit lifted (qps/burst 1000) and so does
drs-prom (``client_qps``/``client_burst``); both use their default node sampling.
Numbers are printed (and written with ``--json``), never asserted.

    python benchmarks/sched_throughput.py --prometheus --nodes 100,1000 --pods 500 \
        --rss-pods 5000 --json /tmp/throughput.json

``--pin`` gives the control plane (etcd, kube-apiserver, Prometheus, the simulated cluster and this
process, which creates the pods and watches the binds) the first half of this process's cores and
each scheduler under test (with its children: drs-prom's write process; kube-scheduler with the
drs-prom extender beside it) the other half, the same for every scheduler, and prints which.
``--rate R`` creates the pods at R per second (a light load for the median) instead of as fast
as 4 threads can. ``--extender`` also runs kube-scheduler with ``drs-prom extender`` (filter and
prioritize, nodeCacheCapable, as deploy/k8s/extender) and reports the median it adds and its drain.
drs-prom's ``drs_scheduling_stage_seconds{stage}`` is printed as a per-stage p50/p99 table, and its CPU per
drained pod by thread (``drs_thread_cpu_seconds_total{thread}``: scheduling, binds, events, the watches, the
journal's writer, the usage history's reads) as a note.

``--py-spy DIR`` records drs-prom's scheduler with py-spy (raw collapsed stacks, one file
per run) for the profile breakdown (benchmarks/profile_breakdown.py).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from drs_prom.agent import default_model_path
from drs_prom.config import SchedulerSettings
from drs_prom.constraints import sampling
from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.process import free_port

# kube-scheduler's default client rate limit (qps 50, burst 100) would cap it near 75 binds/s;
# drs-prom's client has none, so lift it for a like-for-like comparison of the schedulers.
KUBE_CFG = """
clientConnection: {{qps: 1000, burst: 1000}}
profiles:
  - schedulerName: {name}
"""


OWNERS = 0
"""``--owners N``: each pod belongs to one of N ReplicaSets (0: bare pods, each its own owner)."""


def pod_name(i: int) -> str:
    """A bare pod's name, or the name a ReplicaSet's generateName gives its pod (``<replicaset>-<suffix>``)."""
    return f"bench-{i % OWNERS}-{i:05d}" if OWNERS else f"p{i:05d}"


def owner_meta(name: str) -> dict:
    """The metadata a ReplicaSet's pod carries (its controller reference and the ReplicaSet's label), for a pod
    named by pod_name; nothing for a bare pod. The ReplicaSets are not created: no controller runs here, and
    kube-scheduler's default spreading finds no selector for an owner it cannot list, as drs-prom's does."""
    if not OWNERS:
        return {}
    rs = name.rsplit("-", 1)[0]
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": f"uid-{rs}", "controller": True}
    return {"labels": {"app": rs}, "ownerReferences": [ref]}


def pod(name: str, scheduler: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **owner_meta(name)},
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


def process_tree(pids: int | list[int]) -> list[psutil.Process]:
    """The processes ``pids`` and all their children (ended ones left out)."""
    procs: list[psutil.Process] = []
    for pid in [pids] if isinstance(pids, int) else pids:
        try:
            root = psutil.Process(pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return procs


def proc_stats(pids: int | list[int]) -> tuple[float, float]:
    """(RSS MiB, CPU seconds user+system) of a scheduler: the process(es) and their children
    (drs-prom's write process makes the binds' HTTP requests; the extender serves kube-scheduler),
    from /proc via psutil."""
    rss = cpu = 0.0
    for p in process_tree(pids):
        try:
            t = p.cpu_times()
            cpu += t.user + t.system
            rss += p.memory_info().rss / 2**20
        except psutil.NoSuchProcess:  # a child that just ended
            continue
    return rss, cpu


def control_plane_cpu(cp: ControlPlane) -> float:
    """CPU seconds used so far by kube-apiserver and etcd: the share of each bind the control
    plane pays, on the same cores as the scheduler."""
    return sum(proc_stats(p.pid)[1] for p in (cp.apiserver, cp.etcd) if p is not None)


class Pinning:
    """``--pin``: the control plane on ``plane`` cores, each scheduler under test on ``sched`` cores.

    This process pins itself first, so everything it starts afterwards (etcd, kube-apiserver,
    Prometheus, sim-serve) inherits the control plane's cores; a scheduler is moved, with every
    thread and child process, as soon as it is started and again before each measurement
    (threads a Go or Python runtime creates later inherit from already-moved ones)."""

    def __init__(self, cores: list[int]) -> None:
        if len(cores) < 2:
            raise SystemExit(f"--pin needs at least 2 cores, this process may use {cores}")
        half = len(cores) // 2
        self.plane, self.sched = cores[:half], cores[half:]

    def pin_plane(self) -> None:
        os.sched_setaffinity(0, self.plane)

    def pin(self, pids: int | list[int]) -> list[int]:
        """Move ``pids``, their threads and children to the scheduler cores; returns the pids moved."""
        moved = []
        for p in process_tree(pids):
            for tid in (int(t) for t in os.listdir(f"/proc/{p.pid}/task") if t.isdigit()):
                try:
                    os.sched_setaffinity(tid, self.sched)
                except (ProcessLookupError, PermissionError):  # a thread that just ended
                    continue
            moved.append(p.pid)
        return moved

    def describe(self) -> str:
        return f"control plane and load generator on cores {self.plane}; scheduler under test on cores {self.sched}"


PIN: Pinning | None = None  # set by --pin


def pinned(pids: int | list[int]) -> None:
    if PIN is not None:
        PIN.pin(pids)


def create_pods(
    core,
    ns: str,
    scheduler: str,
    n: int,
    created: dict[str, float] | None = None,
    threads: int = 4,
    rate: float = 0.0,
) -> None:
    """``n`` pods as fast as ``threads`` threads can create them or, with ``rate``, at ``rate`` per second."""
    t0 = time.monotonic()

    def create(i: int) -> None:
        if rate:
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        name = pod_name(i)
        core.create_namespaced_pod(ns, pod(name, scheduler), _preload_content=False)
        if created is not None:
            created[name] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(n)))


def wait_bound(watcher: BindWatcher, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while len(watcher.bound) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def run_once(
    cp: ControlPlane, label: str, scheduler_name: str, n_pods: int, pid: int | list[int], settle=None, rate=0.0
) -> dict:
    """Pods created while the scheduler runs: pods/s, create-to-bind p50/p99, CPU per 1000 pods.

    ``settle()`` waits for work the scheduler put off until the burst was over (drs-prom's
    journal rows), so that its CPU per 1000 pods includes it."""
    from kubernetes import client

    core = client.CoreV1Api(cp.admin_client)
    ns = f"bench-{label}-{int(time.time())}"
    cp.create_namespace(ns)
    watcher = BindWatcher(core, ns)
    time.sleep(0.5)
    created: dict[str, float] = {}
    pinned(pid)
    _, cpu0 = proc_stats(pid)
    t0 = time.monotonic()
    create_pods(core, ns, scheduler_name, n_pods, created, rate=rate)
    t_created = time.monotonic()
    wait_bound(watcher, n_pods)
    watcher.stop()
    if settle is not None:
        settle()
    rss, cpu1 = proc_stats(pid)
    lat = np.array([watcher.bound[n] - created[n] for n in created if n in watcher.bound])
    last = max(watcher.bound.values()) if watcher.bound else float("nan")
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    bound = len(watcher.bound)
    return {
        "label": label,
        "pods": n_pods,
        "bound": bound,
        "create_rate": n_pods / (t_created - t0),
        "pods_per_s": bound / (last - t0) if bound else 0.0,
        "p50_ms": float(np.percentile(lat, 50) * 1000) if len(lat) else float("nan"),
        "p99_ms": float(np.percentile(lat, 99) * 1000) if len(lat) else float("nan"),
        "cpu_s_per_1000": (cpu1 - cpu0) / bound * 1000 if bound else float("nan"),
        "rss_mb": rss,
    }


def drain_once(cp: ControlPlane, label: str, scheduler_name: str, n_pods: int, start) -> dict:
    """Create all pods first, then start the scheduler: its pure drain rate (first to last bind)."""
    from kubernetes import client

    core = client.CoreV1Api(cp.admin_client)
    ns = f"drain-{label}-{int(time.time())}"
    cp.create_namespace(ns)
    create_pods(core, ns, scheduler_name, n_pods, threads=16)  # before the scheduler starts: not measured
    watcher = BindWatcher(core, ns)
    time.sleep(0.5)
    pid, stop, settle = start()
    pinned(pid)
    _, cpu0 = proc_stats(pid)
    plane0 = control_plane_cpu(cp)
    try:
        wait_bound(watcher, n_pods)
        plane1 = control_plane_cpu(cp)  # the binds and events it served (before the journal settles)
        if settle is not None:
            settle()  # deferred journal rows count in CPU per 1000 pods
        rss, cpu1 = proc_stats(pid)
    finally:
        watcher.stop()
        stop()
    times = sorted(watcher.bound.values())
    core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    rate = (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 else 0.0
    return {
        "label": label,
        "pods": n_pods,
        "bound": len(times),
        "drain_pods_per_s": rate,
        "drain_rss_mb": rss,
        "drain_control_plane_cpu_s_per_1000": (plane1 - plane0) / len(times) * 1000 if times else float("nan"),
        "drain_cpu_s_per_1000": (cpu1 - cpu0) / len(times) * 1000 if times else float("nan"),
    }


def start_drs(
    cp: ControlPlane,
    workdir: Path,
    model: str | None,
    name: str = "drs-scheduler",
    prom_url: str | None = None,
    py_spy: Path | None = None,
    extra: dict | None = None,
) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cfg = drs_config(workdir, model, name, prom_url, port)
    cfg["scheduler"].update(extra or {})
    path = workdir / f"drs-{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(workdir / "drs.log", "ab")
    argv = argv_tail(path, cp)
    if py_spy is not None:
        py_spy.mkdir(parents=True, exist_ok=True)
        out = py_spy / f"{name}-{int(time.time())}.txt"
        spy = [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--gil",
            "--format",
            "raw",
            "-r",
            "200",
            "-o",
            str(out),
        ]
        argv = [*spy, "--", *argv]
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    pinned(proc.pid)  # before its threads and write process exist: they inherit the cores
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # a loaded 2-core machine imports slowly
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"drs-prom run exited: {(workdir / 'drs.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except Exception:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"drs-prom run never became ready: {(workdir / 'drs.log').read_text()[-3000:]}")


def start_kube(cp: ControlPlane, config_yaml: str, timeout: float = 120):
    """kube-scheduler, moved to the scheduler cores (``--pin``) before it starts scheduling."""
    import ssl

    k = cp.start_kube_scheduler(config_yaml, wait_ready=False)
    pinned(k.pid)
    ctx = ssl._create_unverified_context()  # its self-signed serving certificate, on loopback
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{k.port}/healthz", timeout=1, context=ctx) as r:
                if r.read().strip() == b"ok":
                    pinned(k.pid)
                    return k
        except Exception:
            time.sleep(0.2)
    k.stop()
    raise SystemExit("kube-scheduler never became healthy")


def start_extender(
    cp: ControlPlane, workdir: Path, model: str | None, prom_url: str | None, name: str
) -> tuple[subprocess.Popen, object]:
    """``drs-prom extender`` and kube-scheduler (profile ``name``) calling it for filter and
    prioritize, as deploy/k8s/extender sets them up (weight 5, nodeCacheCapable, ignorable)."""
    port = free_port()
    path = workdir / f"extender-{name}.yaml"
    path.write_text(yaml.safe_dump(drs_config(workdir, model, name, prom_url, free_port())))
    argv = [sys.executable, "-c", "from drs_prom.cli import main; main()", "extender", "--listen"]
    argv += [f"127.0.0.1:{port}", "--config", str(path), "--kubeconfig", str(cp.admin_kubeconfig)]
    log = open(workdir / "extender.log", "ab")
    ext = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    pinned(ext.pid)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if ext.poll() is not None:
            raise SystemExit(f"drs-prom extender exited: {(workdir / 'extender.log').read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    break
        except Exception:
            time.sleep(0.3)
    extenders = [
        {
            "urlPrefix": f"http://127.0.0.1:{port}",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 5,
            "enableHTTPS": False,
            "nodeCacheCapable": True,
            "ignorable": True,
            "httpTimeout": "2s",
        }
    ]
    kube_cfg = yaml.safe_load(KUBE_CFG.format(name=name))
    kube_cfg["extenders"] = extenders
    try:
        kube = start_kube(cp, yaml.safe_dump(kube_cfg))
    except BaseException:
        stop_drs(ext)
        raise
    return ext, kube


def drs_config(workdir: Path, model: str | None, name: str, prom_url: str | None, port: int) -> dict:
    """drs-prom's settings for the bench: real Prometheus (or none: the fallback), lifted client limit."""
    prom = (
        {"url": prom_url, "window": PROM_WINDOW, "max_sample_age_seconds": 120, "timeout_seconds": PROM_TIMEOUT}
        if prom_url
        else {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 0.5}  # nothing listens: fallback
    )
    cfg = {
        "prometheus": prom,
        "scheduler": {
            "metrics_listen": f"127.0.0.1:{port}",
            "leader_election": False,
            "scheduler_name": name,
            "journal_path": str(workdir / f"journal-{name}.sqlite"),
            "model_path": model or str(workdir / "none.keras"),
        },
    }
    if "client_qps" in SchedulerSettings.model_fields:  # as kube-scheduler's lifted limit
        cfg["scheduler"].update(client_qps=1000, client_burst=1000)
    return cfg


def argv_tail(path: Path, cp: ControlPlane) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from drs_prom.cli import main; main()",
        "run",
        "--config",
        str(path),
        "--kubeconfig",
        str(cp.admin_kubeconfig),
    ]


def scheduler_pid(proc: subprocess.Popen) -> int:
    """The scheduler's own pid (py-spy runs it as its child)."""
    try:
        kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    except OSError:
        kids = []
    exe = Path(f"/proc/{proc.pid}/exe").resolve().name if Path(f"/proc/{proc.pid}/exe").exists() else ""
    return int(kids[0]) if kids and exe.startswith("py-spy") else proc.pid


def stop_drs(proc: subprocess.Popen) -> None:
    proc.send_signal(
        signal.SIGINT if Path(f"/proc/{proc.pid}/exe").resolve().name.startswith("py-spy") else signal.SIGTERM
    )
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def drs_metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        return {
            ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
            for ln in r.read().decode().splitlines()
            if ln and not ln.startswith("#") and " " in ln
        }


def journal_settled(url: str, timeout: float = 300) -> None:
    """Wait until drs-prom wrote every journal row it deferred during the burst (drs_journal_backlog_rows 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if drs_metrics(url).get("drs_journal_backlog_rows", 0.0) == 0:
            return
        time.sleep(0.2)


def gc_note(label: str, metrics: dict[str, float]) -> str:
    """The scheduler's garbage-collector pauses so far (drs_python_gc_pause_seconds_total)."""
    parts = []
    for gen in ("0", "1", "2"):
        n = metrics.get(f'drs_python_gc_timed_collections_total{{generation="{gen}"}}', 0.0)
        sec = metrics.get(f'drs_python_gc_pause_seconds_total{{generation="{gen}"}}', 0.0)
        parts.append(f"gen{gen} {n:.0f} x, {sec * 1000:.0f} ms")
    return f"{label}: GC pauses since start: " + "; ".join(parts)


def thread_cpu_per_pod(before: dict[str, float], after: dict[str, float], pods: int) -> dict[str, float]:
    """ms of CPU per drained pod by thread (drs_thread_cpu_seconds_total's change over the drain, the journal's
    settling included), largest first; threads that used under 0.005 ms per pod left out."""
    import re

    out = {}
    for key, value in after.items():
        m = re.fullmatch(r'drs_thread_cpu_seconds_total\{thread="(.*)"\}', key)
        if m and pods:
            ms = (value - before.get(key, 0.0)) / pods * 1000
            if ms >= 0.005:
                out[m.group(1)] = ms
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def thread_note(label: str, drain: dict) -> str:
    threads = drain.get("thread_cpu_ms_per_pod") or {}
    return f"{label}: CPU ms per pod by thread: " + ", ".join(f"{k} {v:.2f}" for k, v in threads.items())


def stage_quantiles(metrics: dict[str, float], q: float) -> dict[str, float]:
    """Per stage of drs_scheduling_stage_seconds, the ``q`` quantile in ms, interpolated in its
    bucket as PromQL's histogram_quantile does (the buckets go 1-2-5 from 50 us)."""
    import re

    buckets: dict[str, list[tuple[float, float]]] = {}
    for key, v in metrics.items():
        m = re.fullmatch(r"drs_scheduling_stage_seconds_bucket\{(.*)\}", key)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        buckets.setdefault(labels["stage"], []).append((float(labels["le"]), v))
    out = {}
    for stage, bs in buckets.items():
        bs.sort()
        total = bs[-1][1]
        if not total:
            continue
        rank, lo, below = q * total, 0.0, 0.0
        for le, cum in bs:
            if cum >= rank:
                hi = le if le != float("inf") else lo
                out[stage] = (lo + (hi - lo) * ((rank - below) / (cum - below) if cum > below else 0)) * 1000
                break
            lo, below = le, cum
    return out


def stage_rows(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    """{stage: {count, p50_ms, p99_ms}} of drs-prom's bound pods so far."""
    p50, p99 = stage_quantiles(metrics, 0.5), stage_quantiles(metrics, 0.99)
    count = lambda st: metrics.get(f'drs_scheduling_stage_seconds_count{{stage="{st}"}}', 0.0)  # noqa: E731
    return {st: {"count": count(st), "p50_ms": p50[st], "p99_ms": p99[st]} for st in STAGES if st in p50}


STAGES = ("watch_to_queue", "queue_wait", "decide", "bind_handover", "bind_write", "event_to_bind")


def fallbacks(metrics: dict[str, float]) -> float:
    return sum(v for k, v in metrics.items() if k.startswith("drs_fallback_decisions_total"))


# -- Prometheus on a simulated cluster of the same size --------------------------------

PROM_SCRAPE = "10s"  # 1000 targets served by one Python process on a shared 2-core machine
PROM_WINDOW = "1m"
PROM_TIMEOUT = 30.0  # a busy Prometheus answers slowly; drs-prom refreshes state off the hot path


def sim_scenario(n: int, workdir: Path) -> tuple[Path, list[str]]:
    """cluster-500's worker type and DRS's applications, ``n`` nodes named like the fake nodes."""
    import drs_prom.sim as sim

    base = yaml.safe_load((Path(sim.__file__).parent / "scenarios" / "cluster-500.yaml").read_text())
    base["name"] = f"bench-{n}"
    base["nodes"][0]["name"] = f"bn{n}"
    base["nodes"][0]["count"] = n
    base["arrivals"] = [{"pods": n, "rate_per_second": max(1.0, n / 60), "process": "poisson"}]
    path = workdir / f"bench-{n}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path, [f"bn{n}-{i + 1}" for i in range(n)]


class SimPrometheus:
    """``drs-prom sim-serve --mode paths`` (own process) and a real Prometheus scraping it."""

    def __init__(self, n: int, workdir: Path) -> None:
        self.n, self.workdir = n, workdir
        self.serve: subprocess.Popen | None = None
        self.prom = None

    def start_serving(self) -> SimPrometheus:
        scenario, _ = sim_scenario(self.n, self.workdir)
        self.port = free_port()
        argv = [sys.executable, "-c", "from drs_prom.cli import main; main()", "sim-serve", "--scenario", str(scenario)]
        argv += ["--mode", "paths", "--port", str(self.port)]
        self.serve = subprocess.Popen(
            argv,
            stdout=open(self.workdir / f"sim-serve-{self.n}.log", "wb"),
            stderr=subprocess.STDOUT,
            cwd=str(REPO),
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        return self

    def start_prometheus(self, names: list[str]) -> str:
        from drs_prom.signals.prometheus import PrometheusSource
        from tests.prom.fixtures import start_prometheus, wait_until

        deadline = time.monotonic() + 300
        url = f"http://127.0.0.1:{self.port}/nodes/{names[0]}/metrics"
        while time.monotonic() < deadline:  # the episode is simulated before serving starts
            if self.serve.poll() is not None:
                raise SystemExit(f"sim-serve exited: {(self.workdir / f'sim-serve-{self.n}.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except Exception:
                time.sleep(1)
        job = {
            "job_name": "node",
            "scrape_interval": PROM_SCRAPE,
            "scrape_timeout": PROM_SCRAPE,
            "static_configs": [
                {
                    "targets": [f"127.0.0.1:{self.port}"],
                    "labels": {"instance": n, "__metrics_path__": f"/nodes/{n}/metrics"},
                }
                for n in names
            ],
        }
        self.prom = start_prometheus(self.workdir / f"prom-{self.n}", extra_config={"scrape_configs": [job]})
        source = PrometheusSource.from_url(
            self.prom.url, window=PROM_WINDOW, timeout_seconds=PROM_TIMEOUT, max_sample_age_seconds=120
        )
        wait_until(lambda: len(source.snapshot().fresh()) == self.n, 400, f"fresh metrics for all {self.n} nodes", 2)
        source.close()
        return self.prom.url

    def stop(self) -> None:
        if self.prom is not None:
            self.prom.stop()
        if self.serve is not None:
            self.serve.terminate()
            try:
                self.serve.wait(20)
            except subprocess.TimeoutExpired:
                self.serve.kill()
                self.serve.wait(10)


def decision_cost(n_nodes: int, model_path: str | None, reps: int = 300) -> dict:
    """Mean ms per decision (filter + load matrix + score) with the model and with kube-default, on the
    scheduling loop's own path: the node table's view, its vectorised filters, the sampled candidates
    and their NodeInfo, request rows, link capacities and device resources from the table, the shared
    score terms, then the Decider. ``spread``: the model
    again for a pod with a ScheduleAnyway zone constraint (nodes in three zones, ten placed pods on each,
    a third of them matching), whose shared term counts over every node."""
    import pandas as pd

    from drs_prom.config import Settings
    from drs_prom.constraints.placed import Neighbours
    from drs_prom.features import FEATURES
    from drs_prom.registry import PolicySpec, make_policy
    from drs_prom.scheduler.decision.decide import Decider
    from drs_prom.scheduler.metrics import SchedulerMetrics
    from drs_prom.scheduler.watch.nodes import NodeTable
    from drs_prom.signals.state import NodeSnapshot
    from drs_prom.types import LabelSelector, NodeInfo, PodRecord, PodRequest, SpreadConstraint

    rng = np.random.default_rng(0)
    names = [f"n{i}" for i in range(n_nodes)]
    frame = pd.DataFrame(rng.uniform(0, 0.8, (n_nodes, 6)), index=names, columns=list(FEATURES))
    frame.iloc[:, 2:] *= 1e8

    class Fixed:
        def snapshot(self):
            return NodeSnapshot(features=frame, taken_at=time.time())

    zone = "topology.kubernetes.io/zone"
    nodes = [
        NodeInfo(name=n, allocatable_cpu_m=64000, allocatable_mem_bytes=256 << 30, labels={zone: f"z{i % 3}"})
        for i, n in enumerate(names)
    ]
    plain = PodRequest(name="p", cpu_m=10, mem_bytes=16 << 20)
    soft = SpreadConstraint(max_skew=1, topology_key=zone, selector=LabelSelector(match_labels=(("app", "p"),)))
    spread = PodRequest(name="p", cpu_m=10, mem_bytes=16 << 20, labels={"app": "p"}, soft_spread=(soft,))
    placed = {
        n: [PodRecord(uid=f"{n}-{j}", namespace="default", node=n, labels=(("app", "pqr"[j % 3]),)) for j in range(10)]
        for n in names
    }
    near = Neighbours(pods_by_node=placed)
    demand = (0.5, 2.0**30, 1e5, 1e5, 0.0, 1e6)
    out = {}
    settings = Settings.model_validate({"scheduler": {"model_path": model_path or ""}})
    model = make_policy("drs", PolicySpec.from_settings(settings))
    for label, policy, pod in (("model", model, plain), ("fallback", None, plain), ("spread", model, spread)):
        d = Decider.from_settings(settings, SchedulerMetrics(), source=Fixed(), policy=policy)
        d.refresh()
        if policy is None:
            d.source = None  # -> prometheus_unreachable -> kube-default
        table = NodeTable(nodes, 1)
        k = sampling.nodes_to_score(n_nodes)
        start = 0
        t0 = time.perf_counter()
        for _ in range(reps):
            view = table.view(lambda: near)
            mask = view.feasible(pod)
            found, processed = sampling.sample_feasible(mask, k, start)
            rows = np.sort((np.arange(processed) + start) % n_nodes)
            start = (start + processed) % n_nodes
            feasible = np.zeros(n_nodes, dtype=bool)
            feasible[found] = True
            infos = view.infos(rows)
            terms = view.soft_scores(pod, rows, feasible[rows])
            d.decide(
                pod,
                demand,
                infos,
                feasible[rows],
                rows=rows,
                names=view.names,
                requests=view.requests(rows),
                soft=terms,
                link=view.link(rows),
                devices=view.devices(rows),
            )
        out[label] = (time.perf_counter() - t0) / reps * 1000
    return out


def write_floor(cp: ControlPlane, node: str, n_pods: int) -> dict[str, float]:
    """CPU ms per pod that Python spends on the binding cycle's two writes alone (a Binding and a
    Scheduled Event, through ``bind.ApiWriter``, no generated client), made one after the other
    from this process, and no decision: the least any Python scheduler that writes like
    kube-scheduler pays per pod, to set beside kube-scheduler's whole CPU per pod. Measured for the
    writer's kept connections (``api_connections``, what the scheduler uses) and, in the same run, for
    urllib3 on the api client's own pool (what it falls back to for a proxy)."""
    from kubernetes import client

    from drs_prom.scheduler.write import api_connections
    from drs_prom.scheduler.write import bind as binder

    core = client.CoreV1Api(cp.admin_client)
    out: dict[str, float] = {}
    kept = binder.ApiWriter(cp.admin_client)
    pooled = binder.ApiWriter(cp.admin_client)
    pooled.connections = api_connections.UrllibPool(cp.admin_client.rest_client.pool_manager, pooled.host, owned=False)
    for label, writer in (("kept connections", kept), ("urllib3", pooled), ("kept connections again", kept)):
        ns = f"floor-{len(out)}-{int(time.time())}"
        cp.create_namespace(ns)
        create_pods(core, ns, "floor-nobody", n_pods, threads=16)
        pods = json.loads(core.list_namespaced_pod(ns, _preload_content=False).data)["items"]
        t0 = time.process_time()
        for pod in pods:
            meta = pod["metadata"]
            binder.bind(writer, ns, meta["name"], meta["uid"], node)
            binder.emit_event(writer, pod, "Scheduled", f"Successfully assigned {ns}/{meta['name']} to {node}", "floor")
        out[label] = (time.process_time() - t0) / max(len(pods), 1) * 1000
        core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    kept.close()
    return out


def create_nodes(cp: ControlPlane, names: list[str]) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda name: cp.create_fake_node(name, cpu="64", memory="256Gi", pods="500"), names))


def delete_nodes(core, names: list[str]) -> None:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(core.delete_node, names))


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=300, help="pods per run")
    ap.add_argument("--nodes", default="5,100", help="comma-separated fake node counts")
    ap.add_argument("--no-drain", dest="drain", action="store_false", help="skip the queue-drain runs")
    ap.add_argument(
        "--prometheus", action="store_true", help="real Prometheus on a simulated cluster; drs uses the model"
    )
    ap.add_argument("--rss-pods", type=int, default=0, help="also drain this many pods at the largest node count (RSS)")
    ap.add_argument(
        "--model", default=None, help="model file (default: the shipped one, drs_prom.agent.default_model_path())"
    )
    ap.add_argument("--json", dest="json_path", default=None, help="write the results per node count here")
    ap.add_argument("--py-spy", dest="py_spy", default=None, help="record drs-prom with py-spy into this directory")
    ap.add_argument("--no-decision-cost", dest="decision_cost", action="store_false")
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also measure Python's CPU per pod for the two writes alone (no decision), in this process",
    )
    ap.add_argument(
        "--in-process-too",
        dest="in_process",
        action="store_true",
        help="also run drs-prom with scheduler.write_process off (binds and events from the scheduling process)",
    )
    ap.add_argument(
        "--decision-cost-only",
        dest="cost_only",
        action="store_true",
        help="only the in-process per-decision cost at each --nodes count (no apiserver, no schedulers)",
    )
    ap.add_argument("--pin", action="store_true", help="control plane and schedulers on separate cores")
    ap.add_argument("--rate", type=float, default=0.0, help="create pods at this many per second (default: flat out)")
    ap.add_argument("--extender", action="store_true", help="also kube-scheduler with drs-prom as its extender")
    ap.add_argument(
        "--owners",
        type=int,
        default=0,
        help="pods belong to this many ReplicaSets, as most pods of a cluster belong to a controller (default 0: "
        "bare pods, so drs-prom's usage estimate reads the history of every pod's owner and image apart)",
    )
    args = ap.parse_args()
    global PIN, OWNERS
    OWNERS = max(0, args.owners)
    if args.pin:
        PIN = Pinning(sorted(os.sched_getaffinity(0)))
        PIN.pin_plane()
        print(f"--pin: {PIN.describe()}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally blocks: stop every process
    if args.cost_only:
        print_decision_cost([int(x) for x in args.nodes.split(",")], args.model)
        return
    model = args.model or str(default_model_path())
    spy = Path(args.py_spy) if args.py_spy else None
    counts = [int(x) for x in args.nodes.split(",")]
    results: list[dict] = []
    drains: list[dict] = []
    notes: list[str] = []
    try:
        with ControlPlane() as cp, tempfile.TemporaryDirectory() as tmp:
            from kubernetes import client

            core = client.CoreV1Api(cp.admin_client)
            work = Path(tmp)
            for n in counts:
                names = sim_scenario(n, work)[1]
                sim = SimPrometheus(n, work).start_serving() if args.prometheus else None
                try:
                    create_nodes(cp, names)
                    prom_url = sim.start_prometheus(names) if sim else None
                    drs, drs_url = start_drs(cp, work, model, prom_url=prom_url, py_spy=spy)
                    kube = start_kube(cp, KUBE_CFG.format(name="bench-kube"))
                    try:
                        time.sleep(1.0)
                        results.append(
                            {
                                "nodes": n,
                                **run_once(
                                    cp,
                                    f"drs-{n}",
                                    "drs-scheduler",
                                    args.pods,
                                    scheduler_pid(drs),
                                    settle=lambda: journal_settled(drs_url),
                                    rate=args.rate,
                                ),
                            }
                        )
                        results[-1]["stages"] = stage_rows(drs_metrics(drs_url))
                        results.append(
                            {"nodes": n, **run_once(cp, f"kube-{n}", "bench-kube", args.pods, kube.pid, rate=args.rate)}
                        )
                        if args.extender:
                            results.append({"nodes": n, **run_extender(cp, work, model, prom_url, n, args)})
                        if args.in_process:
                            results.append({"nodes": n, **run_in_process(cp, work, model, prom_url, n, args.pods)})
                        own = drs_metrics(drs_url)
                        att = own.get("drs_scheduling_attempt_seconds_count", 0)
                        notes.append(
                            f"{n} nodes: drs-prom scheduling cycle (filter+score, no bind) mean "
                            f"{own.get('drs_scheduling_attempt_seconds_sum', 0) / max(att, 1) * 1000:.2f} ms over {att:.0f}"
                            f" attempts; fallback decisions {fallbacks(own):.0f}"
                        )
                        notes.append(gc_note(f"{n} nodes, drs-prom after the created-pods run", own))
                        if args.prometheus and fallbacks(own):
                            notes.append(
                                f"WARNING: {n} nodes: drs-prom fell back {fallbacks(own):.0f} times (not the model)"
                            )
                    finally:
                        stop_drs(drs)
                        kube.stop()
                    pod_counts = [args.pods] if args.drain else []
                    if args.rss_pods and n == max(counts):
                        pod_counts.append(args.rss_pods)
                    for n_pods in pod_counts:
                        holder: dict = {}
                        drs_start = drs_starter(cp, work, model, f"drain-drs-{n_pods}", prom_url, holder, py_spy=spy)

                        def kube_start(n_pods: int = n_pods) -> tuple[int, object, object]:
                            k = start_kube(cp, KUBE_CFG.format(name=f"drain-kube-{n_pods}"))
                            return k.pid, k.stop, None

                        drains.append(
                            {"nodes": n, **drain_once(cp, f"drs-{n}", f"drain-drs-{n_pods}", n_pods, drs_start)}
                        )
                        drains[-1]["stages"] = stage_rows(holder.get("m", {}))
                        drains[-1]["thread_cpu_ms_per_pod"] = thread_cpu_per_pod(
                            holder.get("m0", {}), holder.get("m", {}), drains[-1]["bound"]
                        )
                        notes.append(thread_note(f"{n} nodes, drs-prom draining {n_pods} pods", drains[-1]))
                        notes.append(gc_note(f"{n} nodes, drs-prom after draining {n_pods} pods", holder.get("m", {})))
                        if args.prometheus and fallbacks(holder.get("m", {})):
                            notes.append(
                                f"WARNING: drain at {n} nodes: drs-prom fell back {fallbacks(holder['m']):.0f} times"
                            )
                        drains.append(
                            {"nodes": n, **drain_once(cp, f"kube-{n}", f"drain-kube-{n_pods}", n_pods, kube_start)}
                        )
                        if args.extender and n_pods == args.pods:
                            drains.append(
                                {
                                    "nodes": n,
                                    **drain_once(
                                        cp,
                                        f"ext-{n}",
                                        f"drain-ext-{n_pods}",
                                        n_pods,
                                        extender_starter(cp, work, model, prom_url, n_pods),
                                    ),
                                }
                            )
                        if args.in_process and n_pods == args.pods:
                            inproc_start = drs_starter(
                                cp, work, model, f"drain-inproc-{n_pods}", prom_url, {}, extra=IN_PROCESS
                            )
                            drains.append(
                                {
                                    "nodes": n,
                                    **drain_once(cp, f"inproc-{n}", f"drain-inproc-{n_pods}", n_pods, inproc_start),
                                }
                            )
                    if args.floor:
                        floor = write_floor(cp, names[0], args.pods)
                        notes.append(
                            f"{n} nodes: Python's CPU for a Binding + an Event alone (the write floor), ms per pod: "
                            + ", ".join(f"{k} {v:.2f}" for k, v in floor.items())
                        )
                    delete_nodes(core, names)
                except Exception as exc:  # keep the node counts already measured
                    notes.append(f"ERROR at {n} nodes: {type(exc).__name__}: {str(exc)[:300]}")
                    break
                finally:
                    if sim is not None:
                        sim.stop()
    finally:  # a run cut short (timeout, Ctrl-C) still reports the node counts it measured
        report = summarise(results, drains, counts, args)
        print_report(results, drains, notes, report)
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(report, indent=2))
            print(f"\nwrote {args.json_path}")
    if args.decision_cost:
        print_decision_cost(counts, args.model)


def print_decision_cost(counts: list[int], model: str | None) -> None:
    print("\nper-decision cost in-process (filter + state + score), shipped model vs kube-default fallback:")
    for n in counts:
        c = decision_cost(n, model)
        print(
            f"{n:>5} nodes: model {c['model']:.2f} ms, fallback {c['fallback']:.2f} ms, "
            f"model for a ScheduleAnyway pod {c['spread']:.2f} ms"
        )


def drs_starter(
    cp: ControlPlane,
    work: Path,
    model: str,
    name: str,
    prom_url: str | None,
    holder: dict,
    py_spy: Path | None = None,
    extra: dict | None = None,
):
    """``drain_once``'s start for a drs-prom process: (pid, stop, settle); ``stop`` keeps its last
    /metrics in ``holder["m"]`` before ending it."""

    def start() -> tuple[int, object, object]:
        d, u = start_drs(cp, work, model, name=name, prom_url=prom_url, py_spy=py_spy, extra=extra)
        holder["m0"] = drs_metrics(u)  # the threads' CPU before the drain (drs_thread_cpu_seconds_total)
        stop = lambda: (holder.update(m=drs_metrics(u)), stop_drs(d))  # noqa: E731
        return scheduler_pid(d), stop, lambda: journal_settled(u)

    return start


def extender_starter(cp: ControlPlane, work: Path, model: str, prom_url: str | None, n_pods: int):
    """``drain_once``'s start for kube-scheduler with the drs-prom extender: both processes count."""

    def start() -> tuple[list[int], object, object]:
        ext, kube = start_extender(cp, work, model, prom_url, f"drain-ext-{n_pods}")
        return [kube.pid, ext.pid], lambda: (kube.stop(), stop_drs(ext)), None

    return start


def run_extender(cp: ControlPlane, work: Path, model: str, prom_url: str | None, n: int, args) -> dict:
    """kube-scheduler with drs-prom as its extender, on the same control plane and node count."""
    ext, kube = start_extender(cp, work, model, prom_url, "bench-ext")
    try:
        time.sleep(1.0)
        return run_once(cp, f"ext-{n}", "bench-ext", args.pods, [kube.pid, ext.pid], rate=args.rate)
    finally:
        kube.stop()
        stop_drs(ext)


IN_PROCESS = {"write_process": False}  # binds and events written by the scheduling process itself


def run_in_process(cp: ControlPlane, work: Path, model: str, prom_url: str | None, n: int, pods: int) -> dict:
    """drs-prom with its writes in-process, on the same control plane and node count."""
    drs, url = start_drs(cp, work, model, name="inproc-scheduler", prom_url=prom_url, extra=IN_PROCESS)
    try:
        time.sleep(1.0)
        return run_once(
            cp, f"inproc-{n}", "inproc-scheduler", pods, scheduler_pid(drs), settle=lambda: journal_settled(url)
        )
    finally:
        stop_drs(drs)


def summarise(results: list[dict], drains: list[dict], counts: list[int], args: argparse.Namespace) -> dict:
    """Per node count: both schedulers' numbers and drs-prom / kube-scheduler ratios."""
    out: dict = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "pods": args.pods,
        "prometheus": bool(args.prometheus),
        "model": args.model or str(default_model_path().relative_to(REPO)),
        "rate": args.rate,
        "owners": OWNERS,
        "pin": PIN.describe() if PIN is not None else None,
        "nodes": {},
    }
    for n in counts:
        if not any(x["nodes"] == n for x in results) or len([x for x in results if x["nodes"] == n]) < 2:
            continue
        row: dict = {}
        for who in ("drs", "kube"):
            r = next(x for x in results if x["nodes"] == n and x["label"].startswith(who))
            d = [x for x in drains if x["nodes"] == n and x["label"].startswith(who)]
            main_drain = next((x for x in d if x["pods"] == args.pods), None)
            big = next((x for x in d if x["pods"] != args.pods), None)
            row["drs-prom" if who == "drs" else "kube-scheduler"] = {
                "pods_per_s": r["pods_per_s"],
                "queue_drain_per_s": main_drain["drain_pods_per_s"] if main_drain else None,
                "p50_ms": r["p50_ms"],
                "p99_ms": r["p99_ms"],
                "rss_mb": (big or r)["drain_rss_mb" if big else "rss_mb"],
                "rss_pods": big["pods"] if big else args.pods,
                "cpu_s_per_1000": r["cpu_s_per_1000"],
                "drain_cpu_s_per_1000": main_drain["drain_cpu_s_per_1000"] if main_drain else None,
                "drain_control_plane_cpu_s_per_1000": main_drain["drain_control_plane_cpu_s_per_1000"]
                if main_drain
                else None,
                "drain_cpu_bound_per_s": cpu_bound(main_drain) if main_drain else None,
                "bound": r["bound"],
            }
        d, k = row["drs-prom"], row["kube-scheduler"]
        row["pods_per_s_ratio"] = ratio(d["pods_per_s"], k["pods_per_s"])
        row["queue_drain_ratio"] = (
            ratio(d["queue_drain_per_s"], k["queue_drain_per_s"]) if d["queue_drain_per_s"] is not None else None
        )
        row["p50_ratio"] = ratio(d["p50_ms"], k["p50_ms"])
        drs_run = next(x for x in results if x["nodes"] == n and x["label"].startswith("drs"))
        drs_drain = next((x for x in drains if x["nodes"] == n and x["label"].startswith("drs")), None)
        row["stages"] = {"created": drs_run.get("stages", {}), "drain": (drs_drain or {}).get("stages", {})}
        ext = next((x for x in results if x["nodes"] == n and x["label"].startswith("ext")), None)
        ext_drain = next((x for x in drains if x["nodes"] == n and x["label"].startswith("ext")), None)
        if ext is not None:
            row["kube-scheduler + drs-prom extender"] = {
                "pods_per_s": ext["pods_per_s"],
                "queue_drain_per_s": ext_drain["drain_pods_per_s"] if ext_drain else None,
                "p50_ms": ext["p50_ms"],
                "p99_ms": ext["p99_ms"],
                "p50_added_ms": ext["p50_ms"] - k["p50_ms"],
                "cpu_s_per_1000": ext["cpu_s_per_1000"],
                "rss_mb": ext["rss_mb"],
                "queue_drain_ratio": ratio(ext_drain["drain_pods_per_s"], k["queue_drain_per_s"])
                if ext_drain and k["queue_drain_per_s"]
                else None,
                "p50_ratio": ratio(ext["p50_ms"], k["p50_ms"]),
            }
        inproc = next((x for x in results if x["nodes"] == n and x["label"].startswith("inproc")), None)
        inproc_drain = next((x for x in drains if x["nodes"] == n and x["label"].startswith("inproc")), None)
        if inproc is not None:
            row["drs-prom, writes in-process"] = {
                "pods_per_s": inproc["pods_per_s"],
                "queue_drain_per_s": inproc_drain["drain_pods_per_s"] if inproc_drain else None,
                "p50_ms": inproc["p50_ms"],
                "cpu_s_per_1000": inproc["cpu_s_per_1000"],
                "pods_per_s_ratio": ratio(inproc["pods_per_s"], k["pods_per_s"]),
                "queue_drain_ratio": ratio(inproc_drain["drain_pods_per_s"], k["queue_drain_per_s"])
                if inproc_drain and k["queue_drain_per_s"]
                else None,
                "p50_ratio": ratio(inproc["p50_ms"], k["p50_ms"]),
            }
        out["nodes"][str(n)] = row
    return out


CORES = os.cpu_count() or 1


def cpu_bound(r: dict) -> float:
    """Drain rate if every core ran only the scheduler, apiserver and etcd: CORES / CPU per pod.
    On a machine where they share the cores this bounds the rate whatever the code's parallelism."""
    per_pod = (r["drain_cpu_s_per_1000"] + r["drain_control_plane_cpu_s_per_1000"]) / 1000
    return CORES / per_pod if per_pod > 0 else float("nan")


def print_report(results: list[dict], drains: list[dict], notes: list[str], report: dict) -> None:
    print("\n" + "\n".join(notes))
    head = f"{'scheduler':<12}{'nodes':>6}{'pods':>6}{'bound':>6}{'create/s':>9}{'pods/s':>8}{'p50 ms':>8}"
    print(f"\n{head}{'p99 ms':>8}{'RSS MB':>8}{'cpu s/1000':>11}")
    for r in results:
        print(
            f"{r['label']:<12}{r['nodes']:>6}{r['pods']:>6}{r['bound']:>6}{r['create_rate']:>9.1f}{r['pods_per_s']:>8.1f}"
            f"{r['p50_ms']:>8.1f}{r['p99_ms']:>8.1f}{r['rss_mb']:>8.0f}{r['cpu_s_per_1000']:>11.2f}"
        )
    if drains:
        print("\nqueue drain (all pods pending before the scheduler starts; first to last bind):")
        for r in drains:
            print(
                f"{r['label']:<12}{r['nodes']:>6}{r['pods']:>6}{r['bound']:>6}{r['drain_pods_per_s']:>9.1f} pods/s"
                f"  RSS {r['drain_rss_mb']:.0f} MB  cpu {r['drain_cpu_s_per_1000']:.2f} s/1000 pods"
                f"  apiserver+etcd {r['drain_control_plane_cpu_s_per_1000']:.2f} s/1000 pods"
                f"  (all {CORES} cores busy: at most {cpu_bound(r):.0f} pods/s)"
            )
    for n, row in report["nodes"].items():
        for what, stages in row.get("stages", {}).items():
            if stages:
                print(f"\ndrs-prom at {n} nodes, {what} run: per-stage ms (drs_scheduling_stage_seconds)")
                print(f"{'stage':<16}{'pods':>7}{'p50':>9}{'p99':>9}")
                for st, v in stages.items():
                    print(f"{st:<16}{v['count']:>7.0f}{v['p50_ms']:>9.2f}{v['p99_ms']:>9.2f}")
    if report.get("pin"):
        print(f"\n--pin: {report['pin']}")
    print("\nratios drs-prom / kube-scheduler:")
    for n, row in report["nodes"].items():
        drain = f"{row['queue_drain_ratio']:.2f}" if row["queue_drain_ratio"] is not None else "-"
        print(f"{n:>5} nodes: pods/s {row['pods_per_s_ratio']:.2f}, queue drain {drain}, p50 {row['p50_ratio']:.2f}")
        ex = row.get("kube-scheduler + drs-prom extender")
        if ex is not None:
            d = f"{ex['queue_drain_ratio']:.2f}" if ex["queue_drain_ratio"] is not None else "-"
            print(
                f"{'':>5}   kube-scheduler + extender / kube-scheduler: p50 {ex['p50_ratio']:.2f} "
                f"(+{ex['p50_added_ms']:.1f} ms), queue drain {d}"
            )
        ip = row.get("drs-prom, writes in-process")
        if ip is not None:
            d = f"{ip['queue_drain_ratio']:.2f}" if ip["queue_drain_ratio"] is not None else "-"
            print(
                f"{'':>5}   writes in-process: pods/s {ip['pods_per_s_ratio']:.2f}, queue drain {d}, "
                f"p50 {ip['p50_ratio']:.2f}"
            )


if __name__ == "__main__":
    main()
