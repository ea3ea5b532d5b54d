"""Judging a closed-loop run from what the real components recorded, never the simulator's counters.

Node metrics come from the run's Prometheus (``query_range`` over the run, the project's own
feature queries from drs_prom.signals.promql on a window of four scrapes); pod times come from the
apiserver (the driver's ``drs.io/created-at`` and the twin kubelet's ``drs.io/finished-at``). A pod's full-speed
work, which slowdowns divide by, is the workload's, handed over in process by pod name (nothing on a pod says it).
The per-step numbers are the benchmark's definitions applied to those series:

* imbalance: per step, the sum over the six features of the std across nodes of the load on the
  scenario's scales (cpu/mem as fractions, clipped at 1), averaged over the run's steps;
* utilisation: per step, the mean over nodes and features of used / node capacity, averaged;
* hot_node_time: the fraction of node-steps in which some resource is at >= HOT_THRESHOLD of the
  node's capacity (the node is saturated and its pods are about to contend); this project's
  definition until drs_prom/outcomes/objectives.py (learning-sim) defines one;
* completion: finish - creation, in simulated seconds ((wall) x speed); slowdown: completion /
  the pod's full-speed work; p95 of each over completed pods.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from drs_prom.config import Normalisation
from drs_prom.features import FEATURES
from drs_prom.policies.device_stage import is_device
from drs_prom.signals import promql
from drs_prom.signals.state import scales
from drs_prom.sim.cluster import Nodes
from drs_prom.testbed.kubelet import CREATED_ANNOTATION, FINISHED_ANNOTATION, STARTED_ANNOTATION
from drs_prom.testbed.prom_server import PrometheusProc

HOT_THRESHOLD = 0.9


@dataclass
class NodeSeries:
    """(T, n, N_FEATURES) raw feature values per step (NaN where Prometheus had no sample), step times, node names."""

    t: np.ndarray
    names: tuple[str, ...]
    raw: np.ndarray


def fetch_node_series(
    prom: PrometheusProc, names: Sequence[str], start: float, end: float, step: float, window: str
) -> NodeSeries:
    """query_range of every feature query for every node over [start, end]."""
    t = np.arange(start, end + step / 2, step)
    raw = np.full((len(t), len(names), len(FEATURES)), np.nan)
    index = {n: i for i, n in enumerate(names)}
    for f, expr in enumerate(promql.feature_queries(window).values()):
        for series in prom.query_range(expr, start, end, step):
            i = index.get(series["metric"].get("nodename", ""))
            if i is None:
                continue
            for ts, value in series["values"]:
                k = round((float(ts) - start) / step)
                if 0 <= k < len(t):
                    raw[k, i, f] = float(value)
    return NodeSeries(t=t, names=tuple(names), raw=raw)


def node_metrics(series: NodeSeries, nodes: Nodes, norm: Normalisation, hot_fraction: float = 0.8) -> dict[str, Any]:
    """imbalance, utilisation, hot_node_time and per-node coverage from Prometheus' series; ``hot_node_time_bench``:
    the share of node-steps whose bottleneck is above ``hot_fraction`` of capacity, the objectives' hot-node time
    (drs_prom.outcomes.objectives, ``objectives.hot_fraction``) as far as measured usage shows it (usage is capped at
    capacity where the simulator's demand is not)."""
    raw = series.raw
    used_frac = raw.copy()  # used / capacity per feature
    used_frac[..., 2:] = raw[..., 2:] / nodes.capacity[None, :, 2:]
    scaled = raw / scales(norm)[None, None, :]
    if norm.clip:
        scaled = np.clip(scaled, 0.0, 1.0)
    complete = ~np.isnan(raw).any(axis=2)  # (T, n)
    steps = complete.all(axis=1)  # steps where every node has every feature
    coverage = {name: float(complete[:, i].mean()) if len(complete) else 0.0 for i, name in enumerate(series.names)}
    if not steps.any():
        return {
            "imbalance": math.nan,
            "utilisation": math.nan,
            "hot_node_time": math.nan,
            "hot_node_time_bench": math.nan,
            "steps": 0,
            "node_coverage": coverage,
            "series": {"t": [], "imbalance": [], "utilisation": []},
        }
    imb = scaled[steps].std(axis=1).sum(axis=1)
    util = used_frac[steps].mean(axis=(1, 2))
    peak = used_frac[steps].max(axis=2)
    return {
        "imbalance": float(imb.mean()),
        "utilisation": float(util.mean()),
        "hot_node_time": float((peak >= HOT_THRESHOLD).mean()),
        "hot_node_time_bench": float((peak > hot_fraction).mean()),
        "steps": int(steps.sum()),
        "node_coverage": coverage,
        "series": {
            "t": [float(x - series.t[0]) for x in series.t[steps]],
            "imbalance": imb.tolist(),
            "utilisation": util.tolist(),
        },
    }


@dataclass
class PodOutcome:
    name: str
    node: str | None
    phase: str
    created: float | None
    started: float | None
    finished: float | None
    work: float
    devices: bool = False
    """Whether the pod asks for a device (an extended resource such as ``nvidia.com/gpu``) in its spec."""


@dataclass
class PodTimes:
    pods: list[PodOutcome] = field(default_factory=list)

    @classmethod
    def from_api(cls, items: Sequence[Mapping[str, Any]], work: Mapping[str, float]) -> PodTimes:
        """The pods as the apiserver lists them; ``work``: pod name -> its full-speed work (simulated seconds; NaN
        for a pod not in it)."""
        out = []
        for pod in items:
            ann = pod["metadata"].get("annotations") or {}

            def num(key: str, ann: Mapping[str, str] = ann) -> float | None:
                return float(ann[key]) if key in ann else None

            out.append(
                PodOutcome(
                    name=pod["metadata"]["name"],
                    node=(pod.get("spec") or {}).get("nodeName"),
                    phase=(pod.get("status") or {}).get("phase", "Pending"),
                    created=num(CREATED_ANNOTATION),
                    started=num(STARTED_ANNOTATION),
                    finished=num(FINISHED_ANNOTATION),
                    work=float(work.get(pod["metadata"]["name"], math.nan)),
                    devices=asks_for_devices(pod),
                )
            )
        return cls(out)

    def without(self, names: Collection[str]) -> PodTimes:
        """These pods but ``names`` (the pinned background pods, which no scheduler placed)."""
        return PodTimes([p for p in self.pods if p.name not in names]) if names else self

    def summary(self, speed: float) -> dict[str, Any]:
        done = [p for p in self.pods if p.phase == "Succeeded" and p.created and p.finished]
        comp = np.array([(p.finished - p.created) * speed for p in done])  # type: ignore[operator]
        slow = np.array([c / p.work for c, p in zip(comp, done)])
        # creation -> running on a node (scheduling + bind + the twin kubelet), simulated seconds: what the
        # closed loop adds to completion times that bench does not have
        started = [p for p in done if p.started]
        delay = np.array([(p.started - p.created) * speed for p in started])  # type: ignore[operator]
        # the same for the pods that ask for devices: on a GPU cluster, what fragmentation costs is their wait
        device_delay = delay[np.array([p.devices for p in started], dtype=bool)] if started else delay
        return {
            "pods": len(self.pods),
            "bound": sum(p.node is not None for p in self.pods),
            "completed": sum(p.phase == "Succeeded" for p in self.pods),
            "failed": sum(p.phase == "Failed" for p in self.pods),
            "completion_mean": float(comp.mean()) if len(comp) else math.nan,
            "completion_p95": float(np.percentile(comp, 95)) if len(comp) else math.nan,
            "slowdown_mean": float(slow.mean()) if len(slow) else math.nan,
            "slowdown_p95": float(np.percentile(slow, 95)) if len(slow) else math.nan,
            "start_delay_mean": float(delay.mean()) if len(delay) else math.nan,
            "start_delay_p95": float(np.percentile(delay, 95)) if len(delay) else math.nan,
            "device_pods": sum(p.devices for p in self.pods),
            "device_start_delay_mean": float(device_delay.mean()) if len(device_delay) else math.nan,
            "device_start_delay_p95": float(np.percentile(device_delay, 95)) if len(device_delay) else math.nan,
            "makespan": float(max(p.finished for p in done) - min(p.created for p in done)) * speed  # type: ignore[type-var,operator]
            if done
            else math.nan,
        }


def with_deleted_completions(
    times: PodTimes,
    created: Mapping[str, float],
    started: Mapping[str, float],
    finished: Mapping[str, float],
    work: Mapping[str, float],
    nodes: Mapping[str, str],
) -> PodTimes:
    """``times`` and the pods whose work was done but that the apiserver no longer has: deleted (evicted, as a
    rebalancer sees it still Running) at the instant their work ended, before the twin kubelet wrote Succeeded. Their
    times are the driver's (``created``) and the twin's (``started``, ``finished``, ``nodes``); they completed, not
    lost."""
    listed = {p.name for p in times.pods}
    extra = [
        PodOutcome(
            name, nodes.get(name), "Succeeded", created[name], started.get(name), end, float(work.get(name, math.nan))
        )
        for name, end in finished.items()
        if name not in listed and name in created
    ]
    return PodTimes([*times.pods, *extra]) if extra else times


def continued(
    times: PodTimes, lineage: Mapping[str, str], created: Mapping[str, float], started: Mapping[str, float]
) -> PodTimes:
    """``times`` with every replacement (``lineage``: replacement -> the workload's pod it continues) counted from
    its original's creation and start (``created``, ``started``: pod name -> epoch seconds), as the simulator counts
    an evicted pod's replacement: one pod, one completion, its first start delay."""
    if not lineage:
        return times
    out = []
    for p in times.pods:
        root = lineage.get(p.name)
        if root is not None and root in created:
            p = replace(p, created=created[root], started=started.get(root, p.started))
        out.append(p)
    return PodTimes(out)


def list_pods(api: Any, namespace: str) -> list[dict[str, Any]]:
    from kubernetes import client

    core = client.CoreV1Api(api)
    return list(json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"])


def list_volumes(api: Any, namespace: str, selector: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The PersistentVolumeClaims of ``namespace`` and the PersistentVolumes labelled ``selector`` (the run's)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    claims = json.loads(core.list_namespaced_persistent_volume_claim(namespace, _preload_content=False).data)
    pvs = json.loads(core.list_persistent_volume(label_selector=selector, _preload_content=False).data)
    return list(claims["items"]), list(pvs["items"])


def list_nodes(api: Any, names: Sequence[str]) -> list[dict[str, Any]]:
    """The Node objects named ``names`` (the run's fake nodes), as the apiserver holds them."""
    from kubernetes import client

    wanted = set(names)
    items = json.loads(client.CoreV1Api(api).list_node(_preload_content=False).data)["items"]
    return [n for n in items if n["metadata"]["name"] in wanted]


def asks_for_devices(pod: Mapping[str, Any]) -> bool:
    """Whether any container of ``pod`` (an apiserver Pod) asks for a device (drs_prom.policies.device_stage.is_device)
    in its limits or requests."""
    for container in (pod.get("spec") or {}).get("containers") or ():
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            if any(is_device(name) for name in resources.get(kind) or {}):
                return True
    return False


def extended_misplaced(pods: Sequence[Mapping[str, Any]], nodes: Nodes) -> list[str]:
    """Pods the apiserver shows bound to a node that does not offer the extended resources they ask for (a GPU pod
    on a node without ``nvidia.com/gpu``), read from the pods' own specs and the fake nodes' allocatable, not from
    any scheduler's filters."""
    index = {n: i for i, n in enumerate(nodes.names)}
    out = []
    for pod in pods:
        spec = pod.get("spec") or {}
        i = index.get(spec.get("nodeName") or "")
        if i is None:
            continue
        for container in spec.get("containers") or ():
            limits = (container.get("resources") or {}).get("limits") or {}
            for name, amount in limits.items():
                if name in ("cpu", "memory"):
                    continue
                have = nodes.alloc_scalar.get(name)
                if have is None or int(have[i]) < int(amount):
                    out.append(pod["metadata"]["name"])
    return sorted(set(out))


def counter_by(prom: PrometheusProc, metric: str, label: str, end: float, seconds: float) -> dict[str, float]:
    """A drs-prom counter over the run by ``label`` (e.g. fallback decisions by reason), from its /metrics as
    Prometheus scraped them: the highest value each process reached, summed, so a killed replica's count stays."""
    rng = f"{max(1, math.ceil(seconds))}s"
    expr = f"sum by ({label}) (max_over_time({metric}[{rng}]))"
    return {r["metric"].get(label, "?"): float(r["value"][1]) for r in prom.query(expr, at=end)}


SCHEDULER_COUNTERS = {
    "fallback_decisions": ("drs_fallback_decisions_total", "reason"),
    "decisions_by_policy": ("drs_decisions_total", "policy"),
    "usage_estimates": ("drs_usage_estimates_total", "source"),  # where each pod's usage estimate came from
    "extender_calls": ("drs_extender_requests_total", "verb"),  # kube-scheduler+drs: the calls drs-prom served
}
"""What a run reads of drs-prom's /metrics: report key -> (counter, the label it is summed by)."""


def scheduler_counters(prom: PrometheusProc, end: float, span: float, served: bool) -> dict[str, dict[str, float]]:
    """drs-prom's own counters over a run, by label (``SCHEDULER_COUNTERS``); empty where no drs-prom process served
    /metrics (kube-scheduler alone)."""
    return {
        key: counter_by(prom, metric, label, end, span) if served else {}
        for key, (metric, label) in SCHEDULER_COUNTERS.items()
    }
