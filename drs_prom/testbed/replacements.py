"""The testbed's stand-in for its pods' controllers when one is evicted: the replacement a ReplicaSet or Job makes.

The testbed's own control plane runs no controller manager, and its pods' owners (a Deployment's ReplicaSet, a Job)
exist only as references, so when a rebalancer evicts a pod nothing would recreate it. ``Replacements`` does what the
owner's controller does: a new pod of the same spec and owner, named as the controller names its pods, created at
once. Its work is the simulator's (drs_prom.sim.rebalancer and ``Cluster.evict``): what the evicted pod had left, or
all of its work when the profile's ``restart.state`` is ``lost``, plus ``restart.penalty_seconds``, with the same
usage profile. A bare pod has no controller: it is not replaced (a rebalancer never chooses one).

``lineage`` maps each replacement to the pod the workload created (through any chain of evictions), so the judge
counts one pod from its first creation to its last replacement's end, over its workload work, as the simulator does.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from drs_prom.sim.rebalancer import restart_of
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.workload import Workload
from drs_prom.testbed.driver import WorkloadDriver
from drs_prom.testbed.kubelet import TwinKubelet
from drs_prom.testbed.pod_owners import PodOwners

log = logging.getLogger(__name__)


@dataclass
class Eviction:
    pod: str
    at: float  # epoch seconds
    work_left: float  # full-speed simulated seconds the evicted pod had left
    replacement: str | None  # None: a bare pod, or the replacement could not be created


@dataclass
class ReplacementLog:
    evictions: list[Eviction] = field(default_factory=list)
    lineage: dict[str, str] = field(default_factory=dict)  # replacement -> the workload's pod it continues


class Replacements(threading.Thread):
    """Creates the replacement of every evicted pod of a run (module docstring), on a thread of its own so that the
    twin kubelet's watch, which reports the eviction, never waits on the apiserver."""

    def __init__(
        self, scenario: Scenario, wl: Workload, owners: PodOwners, driver: WorkloadDriver, kubelet: TwinKubelet
    ) -> None:
        super().__init__(daemon=True, name=f"replacements-{driver.ns}")
        self.scenario, self.wl, self.owners, self.driver, self.kubelet = scenario, wl, owners, driver, kubelet
        self.rows = owners.rows()
        self.result = ReplacementLog()
        self._taken = set(owners.names)
        self._queue: queue.Queue[tuple[str, float, float]] = queue.Queue()
        self._halt = threading.Event()
        self._busy = 0
        self._lock = threading.Lock()

    def on_evicted(self, name: str, work_left: float) -> None:
        """The twin kubelet's callback: ``name`` was deleted while it ran, with ``work_left`` to do."""
        with self._lock:
            self._busy += 1
        self._queue.put((name, work_left, time.time()))

    def idle(self) -> bool:
        """No eviction waits for its replacement (the run may end)."""
        with self._lock:
            return self._busy == 0

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                name, left, at = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            try:
                made = self._replace(name, left)
                self.result.evictions.append(Eviction(name, at, left, made))
            finally:
                with self._lock:
                    self._busy -= 1

    def _replace(self, name: str, left: float) -> str | None:
        root = self.result.lineage.get(name, name)
        row = self.rows.get(root)
        if row is None:
            return None  # not a pod of the workload (a fault script's): nothing owns it
        new = None
        for attempt in range(100):
            candidate = self.owners.replacement_name(row, attempt)
            if candidate is None:
                return None  # a bare pod: nothing recreates it
            if candidate not in self._taken:
                new = candidate
                break
        if new is None:
            return None
        self._taken.add(new)
        restart = restart_of(self.scenario, self.wl.profiles[row])
        work = (float(self.wl.work[row]) if restart.state == "lost" else left) + restart.penalty_seconds
        demand = tuple(float(x) for x in self.wl.demand[row])
        factor = None if self.wl.usage_factor is None else self.wl.usage_factor[row]
        self.kubelet.expect(new, (demand, work), factor)
        body = self.driver.manifest(row)  # the driver's workload and owners are this run's
        body["metadata"]["name"] = new
        self.result.lineage[new] = root
        if not self.driver.create(body):
            log.warning("replacement %s of %s could not be created", new, name)
            return None
        return new

    def stop(self) -> None:
        self._halt.set()
        self.join(20)
