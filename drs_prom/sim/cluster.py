"""The simulated cluster: nodes with capacities, running pods, and exact load integrals.

Over 400 lines because the rates, their integrals and every change to the running set (bind, completion, eviction,
a step of the pods' usage profile) are one state that must stay consistent.

Event-driven, not ticked: between two events (an arrival, a bind, a completion) every
rate is constant, so the simulator jumps straight to the next event and integrates
load exactly. A 100-pod episode is a few hundred numpy steps instead of thousands of
1 s ticks, and counters (CPU seconds, bytes) are exact integrals, which is what the
exporter (serve.py) needs to publish monotonic totals.

Contention model: on each node, D = idle + sum of running pods' demand per resource.
Where D exceeds capacity C, the node's stretch on that resource is D/C; a pod runs at
1 / (max stretch over the resources it uses), so overcommit costs completion time in
proportion. A slowed pod consumes its rates in proportion too (so measured CPU and
byte rates never exceed capacity); memory is held in full (it is not a rate), and
memory overcommit slows pods as swapping would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from drs_prom.constraints.framework import NodeArrays
from drs_prom.features import N_FEATURES
from drs_prom.sim.scenario import Scenario, node_labels
from drs_prom.sim.workload import Workload
from drs_prom.types import NodeInfo, Taint

_EPS = 1e-9

Recorder = Callable[[float, float, np.ndarray], None]
"""Called with (t0, t1, used) for every constant-rate segment; used is (n, N_FEATURES) absolute."""


@dataclass(frozen=True)
class Nodes:
    """Static node properties as arrays (n rows, scenario order)."""

    names: tuple[str, ...]
    capacity: np.ndarray  # (n, N_FEATURES) absolute: cores, bytes, B/s x4
    idle: np.ndarray  # (n, N_FEATURES) absolute load with no pods
    alloc_cpu_m: np.ndarray  # (n,) int64
    alloc_mem: np.ndarray  # (n,) int64
    alloc_pods: np.ndarray  # (n,) int64
    labels: tuple[dict[str, str], ...]
    taints: tuple[tuple[Taint, ...], ...]
    alloc_scalar: dict[str, np.ndarray] = field(default_factory=dict)  # extended resource -> (n,) int64

    @classmethod
    def from_scenario(cls, scenario: Scenario) -> Nodes:
        names, cap, idle, acpu, amem, apods, labels, taints = [], [], [], [], [], [], [], []
        extended: list[dict[str, int]] = []
        for t in scenario.nodes:
            for i in range(t.count):
                names.append(f"{t.name}-{i + 1}")
                c = list(t.capacity)
                cap.append(c)
                idle.append([t.idle.cpu * c[0], t.idle.mem * c[1]] + [0.0] * (len(c) - 2))
                acpu.append(t.alloc_cpu_m)
                amem.append(t.alloc_mem)
                apods.append(t.allocatable_pods)
                labels.append(node_labels(t, i))
                taints.append(tuple(Taint(x.key, x.value, x.effect) for x in t.taints))
                extended.append(t.extended)
        names_x = sorted({k for e in extended for k in e})
        return cls(
            names=tuple(names),
            capacity=np.array(cap, dtype=np.float64),
            idle=np.array(idle, dtype=np.float64),
            alloc_cpu_m=np.array(acpu, dtype=np.int64),
            alloc_mem=np.array(amem, dtype=np.int64),
            alloc_pods=np.array(apods, dtype=np.int64),
            labels=tuple(labels),
            taints=tuple(taints),
            alloc_scalar={k: np.array([e.get(k, 0) for e in extended], dtype=np.int64) for k in names_x},
        )

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def infos(self) -> list[NodeInfo]:
        """The nodes as the filters read them with nothing placed on them (what the NODE-stage filters read); the
        cluster's views add what is placed (``Cluster.node_infos``)."""
        return [
            NodeInfo(
                name=name,
                allocatable_cpu_m=acpu,
                allocatable_mem_bytes=amem,
                allocatable_pods=apods,
                labels=labels,
                taints=taints,
                allocatable_scalar={k: int(v[i]) for k, v in self.alloc_scalar.items()} if self.alloc_scalar else {},
            )
            for i, (name, acpu, amem, apods, labels, taints) in enumerate(
                zip(
                    self.names,
                    self.alloc_cpu_m.tolist(),
                    self.alloc_mem.tolist(),
                    self.alloc_pods.tolist(),
                    self.labels,
                    self.taints,
                )
            )
        ]


@dataclass
class Cluster:
    """Mutable simulation state over one workload. ``copy()`` is cheap (used for settle look-ahead)."""

    nodes: Nodes
    workload: Workload
    metric_window: float = 0.0
    t: float = 0.0
    node_of: np.ndarray = field(init=False)  # (P,) -1 until bound
    remaining: np.ndarray = field(init=False)  # (P,) seconds of full-speed work left
    start: np.ndarray = field(init=False)
    finish: np.ndarray = field(init=False)
    running: np.ndarray = field(init=False)  # indices of running pods
    req_cpu_m: np.ndarray = field(init=False)
    req_mem: np.ndarray = field(init=False)
    pod_count: np.ndarray = field(init=False)
    req_scalar: dict[str, np.ndarray] = field(init=False)  # extended resource -> (n,) requested by running pods
    cum: np.ndarray = field(init=False)  # (n, N_FEATURES) integral of used load since t=0 (core-s, byte-s, bytes)
    pod_cum: np.ndarray = field(init=False)  # (P, N_FEATURES) the same per pod: what its cAdvisor series count
    _hist_t: list[float] = field(init=False)
    _hist_cum: list[np.ndarray] = field(init=False)
    _rates: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        p, n = len(self.workload), len(self.nodes)
        self.node_of = np.full(p, -1, dtype=np.int64)
        self.remaining = self.workload.work.astype(np.float64).copy()
        self.start = np.full(p, np.nan)
        self.finish = np.full(p, np.nan)
        self.running = np.zeros(0, dtype=np.int64)
        self.req_cpu_m = np.zeros(n, dtype=np.int64)
        self.req_mem = np.zeros(n, dtype=np.int64)
        self.pod_count = np.zeros(n, dtype=np.int64)
        self.req_scalar = {}
        self.cum = np.zeros((n, N_FEATURES))
        self.pod_cum = np.zeros((p, N_FEATURES))
        self._pod_used = np.zeros((0, N_FEATURES))
        self._hist_t = [self.t]
        self._hist_cum = [self.cum.copy()]

    def copy(self) -> Cluster:
        c = object.__new__(Cluster)
        c.nodes, c.workload, c.metric_window, c.t = self.nodes, self.workload, self.metric_window, self.t
        for name in (
            "node_of",
            "remaining",
            "start",
            "finish",
            "running",
            "req_cpu_m",
            "req_mem",
            "pod_count",
            "cum",
            "pod_cum",
        ):
            setattr(c, name, getattr(self, name).copy())
        c._pod_used = self._pod_used
        c.req_scalar = {k: v.copy() for k, v in self.req_scalar.items()}
        c._hist_t = list(self._hist_t)
        c._hist_cum = list(self._hist_cum)
        c._rates = self._rates
        return c

    def replace_future(self, workload: Workload, arrived: int) -> None:
        """Go on with ``workload``, whose first ``arrived`` pods are this one's (their state is kept) and whose
        later pods have not arrived yet (a sampled future)."""
        p = len(workload)
        fresh = {
            "node_of": np.full(p, -1, dtype=np.int64),
            "remaining": workload.work.astype(np.float64).copy(),
            "start": np.full(p, np.nan),
            "finish": np.full(p, np.nan),
            "pod_cum": np.zeros((p, N_FEATURES)),
        }
        for name, values in fresh.items():
            values[:arrived] = getattr(self, name)[:arrived]
            setattr(self, name, values)
        self.workload = workload

    # --- views -----------------------------------------------------------------
    def node_infos(self) -> list[NodeInfo]:
        """Fresh NodeInfo records (requested sums included) for filters and request-based scorers."""
        scalars = self.req_scalar
        return [
            replace(
                base,
                requested_cpu_m=rcpu,
                requested_mem_bytes=rmem,
                pod_count=count,
                requested_scalar={k: int(v[i]) for k, v in scalars.items() if v[i]} if scalars else {},
            )
            for i, (base, rcpu, rmem, count) in enumerate(
                zip(self.nodes.infos, self.req_cpu_m.tolist(), self.req_mem.tolist(), self.pod_count.tolist())
            )
        ]

    def arrays(self) -> NodeArrays:
        """Allocatable and requested resources per node, as the filters' REQUESTS stage reads them."""
        nd = self.nodes
        return NodeArrays(
            nd.alloc_cpu_m,
            nd.alloc_mem,
            nd.alloc_pods,
            self.req_cpu_m,
            self.req_mem,
            self.pod_count,
            nd.alloc_scalar,
            self.req_scalar,
        )

    def _compute_rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(speed of each running pod, used load per node (n, N_FEATURES), uncapped demand per node (n, N_FEATURES));
        cached until the running set changes."""
        if self._rates is not None:
            return self._rates
        n = len(self.nodes)
        idx = self.running
        where = self.node_of[idx]
        dem = self.demand_now(idx)
        total = self.nodes.idle.copy()
        for f in range(N_FEATURES):
            total[:, f] += np.bincount(where, weights=dem[:, f], minlength=n)
        stretch = np.maximum(1.0, total / self.nodes.capacity)
        per_pod = np.where(dem > 0, stretch[where], 1.0)
        slow = per_pod.max(axis=1) if len(idx) else np.zeros(0)
        speed = 1.0 / slow if len(idx) else np.zeros(0)
        used = self.nodes.idle.copy()
        scaled = dem * speed[:, None]
        scaled[:, 1] = dem[:, 1]  # memory is held, not throttled
        for f in range(N_FEATURES):
            used[:, f] += np.bincount(where, weights=scaled[:, f], minlength=n)
        used = np.minimum(used, self.nodes.capacity)
        self._pod_used = scaled
        self._rates = (speed, used, total)
        return self._rates

    def demand_now(self, idx: np.ndarray) -> np.ndarray:
        """Full-speed demand of pods ``idx`` now: the workload's, times its usage profile where it has one."""
        wl = self.workload
        if wl.usage_times is None or wl.usage_factor is None:
            return wl.demand[idx]
        k = int(np.searchsorted(wl.usage_times, self.t, side="right"))
        return wl.demand[idx] * wl.usage_factor[idx, k]

    def next_change(self) -> float:
        """When the pods' usage next changes (a step of the workload's usage profile); inf without one."""
        times = self.workload.usage_times
        if times is None:
            return float("inf")
        k = int(np.searchsorted(times, self.t, side="right"))
        return float(times[k]) if k < len(times) else float("inf")

    def used(self) -> np.ndarray:
        """Instantaneous used load per node, absolute units (n, N_FEATURES)."""
        return self._compute_rates()[1]

    def demand(self) -> np.ndarray:
        """Instantaneous demand per node (idle + running pods at full speed), absolute, uncapped (n, N_FEATURES)."""
        return self._compute_rates()[2]

    def slowdowns(self) -> np.ndarray:
        """Current stretch (>= 1) of every running pod, aligned with ``running``."""
        speed = self._compute_rates()[0]
        return 1.0 / speed if len(speed) else speed

    def raw_features(self, used: np.ndarray) -> np.ndarray:
        """Absolute load -> the FEATURES raw units (cpu/mem fractions, byte rates)."""
        out = used.copy()
        out[:, 0] /= self.nodes.capacity[:, 0]
        out[:, 1] /= self.nodes.capacity[:, 1]
        return out

    def observed(self) -> np.ndarray:
        """Load as a metrics pipeline sees it now: the mean over the last ``metric_window`` seconds (raw units)."""
        w = self.metric_window
        if w <= 0 or self.t <= 0:
            return self.raw_features(self.used())
        t0 = max(0.0, self.t - w)
        return self.raw_features((self.cum - self._cum_at(t0)) / (self.t - t0))

    def _cum_at(self, t0: float) -> np.ndarray:
        ts = self._hist_t
        j = int(np.searchsorted(ts, t0, side="right")) - 1  # last history point <= t0
        j = max(j, 0)
        if j + 1 >= len(ts):
            return self._hist_cum[j] + self.used() * (t0 - ts[j])
        a, b = ts[j], ts[j + 1]
        frac = 0.0 if b <= a else (t0 - a) / (b - a)
        return self._hist_cum[j] + (self._hist_cum[j + 1] - self._hist_cum[j]) * frac

    # --- mutation ----------------------------------------------------------------
    def bind(self, pod: int, node: int) -> None:
        if self.node_of[pod] >= 0:
            raise ValueError(f"pod {self.workload.names[pod]} is already bound")
        self.node_of[pod] = node
        self.start[pod] = self.t
        self.running = np.append(self.running, pod)
        self.hold(pod, node)
        self._rates = None

    def hold(self, pod: int, node: int, sign: int = 1) -> None:
        """Count ``pod``'s requests on ``node`` (``sign`` -1: take them off): a bound pod's, or those of a replica
        of it still starting there (a surge, drs_prom.sim.rebalancer), which the filters count as a pod's."""
        wl = self.workload
        self.req_cpu_m[node] += sign * wl.cpu_m[pod]
        self.req_mem[node] += sign * wl.mem_bytes[pod]
        self.pod_count[node] += sign
        if wl.scalar is not None:
            for name, amount in wl.scalar[pod]:
                arr = self.req_scalar.get(name)
                if arr is None:
                    arr = self.req_scalar[name] = np.zeros(len(self.nodes), dtype=np.int64)
                arr[node] += sign * amount

    def next_completion(self) -> float:
        """Time of the next pod completion at current rates (inf when nothing runs)."""
        if not len(self.running):
            return float("inf")
        speed = self._compute_rates()[0]
        return self.t + float(np.min(self.remaining[self.running] / speed))

    def advance(self, t_end: float, recorder: Recorder | None = None) -> np.ndarray:
        """Run until ``t_end`` or the first completion, whichever is earlier; returns completed pod indices."""
        if t_end < self.t - _EPS:
            raise ValueError("time cannot go backwards")
        if not len(self.running) and not np.isfinite(t_end):
            raise ValueError("nothing runs: advancing to infinity would never end")
        speed, used, _ = self._compute_rates()
        t_done = self.next_completion()
        t_change = self.next_change()  # inf without a usage profile: then exactly as before
        limit = t_change if t_change < t_end else t_end
        completes = t_done <= limit
        t_next = t_done if completes else limit
        dt = max(0.0, t_next - self.t)
        done = np.zeros(0, dtype=np.int64)
        if dt > 0:
            if recorder is not None:
                recorder(self.t, t_next, used)
            self.cum += used * dt
            if len(self.running):
                self.remaining[self.running] -= speed * dt
                self.pod_cum[self.running] += self._pod_used * dt
            self.t = t_next
            self._record_history()
        else:
            self.t = max(self.t, t_next)
        if t_change <= self.t:  # the usage profile stepped: the rates change
            self._rates = None
        if len(self.running):
            rem = self.remaining[self.running]
            finished = rem <= _EPS * np.maximum(1.0, self.workload.work[self.running])
            if completes:  # the pod that set t_done finishes even if rounding left a crumb of work
                finished[int(np.argmin(rem / speed))] = True
            if finished.any():
                done = self.running[finished]
                self._release(done, self.running[~finished])
        return done

    def evict(self, pod: int, extra_seconds: float = 0.0, lose_progress: bool = False) -> int:
        """Take running ``pod`` off its node (an eviction); returns the node. Its replacement still has to do the
        work left (all of it when ``lose_progress``: its state is lost) plus ``extra_seconds`` (starting again), and
        waits unbound until placed. Its stored usage starts again with the replacement, as a new pod's series do."""
        node = int(self.node_of[pod])
        if node < 0 or pod not in self.running:
            raise ValueError(f"pod {self.workload.names[pod]} is not running")
        self.hold(pod, node, -1)
        left = self.workload.work[pod] if lose_progress else self.remaining[pod]
        self.remaining[pod] = float(left) + float(extra_seconds)
        self.node_of[pod] = -1
        self.start[pod] = np.nan
        self.pod_cum[pod] = 0.0
        self.running = self.running[self.running != pod]
        self._rates = None
        return node

    def switch(self, pod: int, node: int, lose_progress: bool = False) -> int:
        """Running ``pod`` hands over to its replica on ``node``, started there earlier and holding its requests
        since (``hold``): a move made before the break. The replica goes on with the work left (all of it when
        ``lose_progress``) and no start of its own to redo, since it started while the pod ran; its stored usage
        starts with it, as a new pod's series do. Returns the node the pod left."""
        left = int(self.node_of[pod])
        if left < 0 or pod not in self.running:
            raise ValueError(f"pod {self.workload.names[pod]} is not running")
        self.hold(pod, left, -1)
        if lose_progress:
            self.remaining[pod] = float(self.workload.work[pod])
        self.node_of[pod] = node
        self.start[pod] = self.t
        self.pod_cum[pod] = 0.0
        self._rates = None
        return left

    def _release(self, pods: np.ndarray, still_running: np.ndarray) -> None:
        self.remaining[pods] = 0.0
        self.finish[pods] = self.t
        where = self.node_of[pods]
        n = len(self.nodes)
        self.req_cpu_m -= np.bincount(where, weights=self.workload.cpu_m[pods], minlength=n).astype(np.int64)
        self.req_mem -= np.bincount(where, weights=self.workload.mem_bytes[pods], minlength=n).astype(np.int64)
        self.pod_count -= np.bincount(where, minlength=n)
        if self.workload.scalar is not None:
            for pod, node in zip(pods.tolist(), where.tolist()):
                for name, amount in self.workload.scalar[pod]:
                    self.req_scalar[name][node] -= amount
        self.running = still_running
        self._rates = None

    def _record_history(self) -> None:
        self._hist_t.append(self.t)
        self._hist_cum.append(self.cum.copy())
        if self.metric_window <= 0:
            del self._hist_t[:-1], self._hist_cum[:-1]
            return
        # keep one point at or before t - window so windowed averages stay exact
        horizon = self.t - self.metric_window
        k = int(np.searchsorted(self._hist_t, horizon, side="right")) - 1
        if k > 0:
            del self._hist_t[:k], self._hist_cum[:k]
