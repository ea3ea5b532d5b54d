"""kube-scheduler's DefaultPreemption as the oracle of victims, and drs-prom's choice on the same objects.

Each case gets a fresh namespace and its own nodes; its pods are bound directly (``nodeName``, as pods
another scheduler placed) and marked Running and Ready with their start times, and the real disruption
controller (kube-controller-manager, started here) writes each PodDisruptionBudget's status. Once every
budget's status counts the case's pods, the preemptor is created for the real kube-scheduler (its own
profile, only this case's nodes through a nodeSelector) and drs-prom's candidates are computed from the
objects read back from the apiserver before it (``feasibility.preemption_candidates``). kube-scheduler nominates a node and
evicts (victims have a zero grace period, so they are gone at once); its ``scheduler_preemption_victims``
histogram, observed as a preemption starts, says how many victims it chose, and once that many of the
case's pods are gone they are its victims. A pod it does not preempt for ends ``PodScheduled=False``
without a nominated node, or binds with no eviction.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from drs_prom.constraints.preemption import Candidate, best
from drs_prom.scheduler.feasibility import preemption_candidates
from tests.differential.oracle import Rest
from tests.differential.preemption_cases import APPS, PORT, PREEMPTOR_APP, PRIORITIES, PreemptionCase

SCHEDULER_NAME = "drs-pre"
CASE_LABEL = "drs-pre/case"
WAIT_SECONDS = 30.0
POLL_SECONDS = 0.02
REFERENCE = 1_700_000_000  # start times are this minus each pod's offset (seconds)
MERGE = {"Content-Type": "application/merge-patch+json"}


def class_name(priority: int, never: bool = False) -> str:
    return f"drs-pre-{priority}{'-never' if never else ''}"


def scheduler_config() -> str:
    """One profile (the default plugins, DefaultPreemption included), every node looked at, retries soon."""
    return f"""
percentageOfNodesToScore: 100
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
  - schedulerName: {SCHEDULER_NAME}
"""


@dataclass
class PreemptionOutcome:
    """What each side chose: kube-scheduler's node and victims (names), drs-prom's best candidates."""

    kube_node: str
    kube_victims: frozenset[str]
    drs: list[Candidate]
    candidates: list[Candidate]  # every node drs-prom found preemption could help on
    seconds: float = 0.0

    @property
    def agree(self) -> bool:
        if not self.kube_victims:
            return not self.drs
        return any(c.node == self.kube_node and _names(c) == self.kube_victims for c in self.drs)

    @property
    def kube_violations(self) -> int | None:
        """Budget violations of kube-scheduler's victims, counted as drs-prom counts them on that node (None:
        kube-scheduler preempted on a node drs-prom found no candidate on)."""
        on_node = [c for c in self.candidates if c.node == self.kube_node]
        if not self.kube_victims:
            return 0
        if not on_node:
            return None
        return on_node[0].violations if _names(on_node[0]) == self.kube_victims else None

    @property
    def avoidable_violation(self) -> bool:
        """drs-prom's choice breaks a budget although a candidate that breaks none existed."""
        chosen = self.drs[0].violations if self.drs else 0
        return chosen > 0 and any(c.violations == 0 for c in self.candidates)

    @property
    def tied(self) -> bool:
        return len(self.drs) > 1

    def describe(self) -> str:
        drs = "; ".join(f"{c.node}: {sorted(_names(c))} ({c.violations} PDB violations)" for c in self.drs) or "none"
        return f"kube-scheduler: {self.kube_node or '-'} {sorted(self.kube_victims)}\ndrs-prom: {drs}"


def _names(c: Candidate) -> frozenset[str]:
    return frozenset(v.name for v in c.victims)


def _away_from(app: str) -> dict[str, Any]:
    """Required anti-affinity: never on a node (hostname) with a pod of ``app``."""
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _pod_body(
    name: str, node: str, cpu_m: int, pclass: str, labels: dict[str, str], port: bool, away: str = ""
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": f"{cpu_m}m", "memory": "64Mi"}},
    }
    if port:
        container["ports"] = [{"containerPort": PORT, "hostPort": PORT}]
    spec: dict[str, Any] = {"priorityClassName": pclass, "containers": [container], "terminationGracePeriodSeconds": 0}
    if node:
        spec["nodeName"] = node
    if away:
        spec["affinity"] = _away_from(away)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


class PreemptionOracle:
    """Runs preemption cases on a started ``ControlPlane``: its own kube-scheduler and kube-controller-manager."""

    def __init__(self, control_plane: Any) -> None:
        self.cp = control_plane
        self.rest = Rest(control_plane.server, control_plane.admin_token, str(control_plane.ca_file))
        self.counter = itertools.count()
        self.run_id = f"{int(time.time()) % 100000:05d}"
        self.scheduler = None
        self.controllers = None
        try:
            for value in PRIORITIES:
                for never in (False, True):
                    self._priority_class(value, never)
            self.controllers = control_plane.start_kube_controller_manager(("disruption-controller",))
            self.scheduler = control_plane.start_kube_scheduler(scheduler_config())
        except BaseException:
            self.close()
            raise

    def _priority_class(self, value: int, never: bool) -> None:
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": class_name(value, never)},
            "value": value,
            "preemptionPolicy": "Never" if never else "PreemptLowerPriority",
        }
        self.rest.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body, ok=(409,))

    def close(self) -> None:
        for proc in (self.scheduler, self.controllers):
            if proc is not None:
                proc.stop()
                for group in (self.cp.schedulers, self.cp.controller_managers):
                    if proc in group:
                        group.remove(proc)
        self.rest.session.close()

    def __enter__(self) -> PreemptionOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _wait(self, what: str, check: Any) -> Any:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if (got := check()) is not None:
                return got
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"timed out after {WAIT_SECONDS:.0f}s waiting for {what}")

    # -- one case ------------------------------------------------------------------------------
    def run(self, case: PreemptionCase) -> PreemptionOutcome:
        t0 = time.monotonic()
        prefix = f"p{self.run_id}-{next(self.counter)}"
        ns = prefix
        try:
            self.rest.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
            nodes = [self._node(f"{prefix}-n{i}", prefix, cpu, pods) for i, (cpu, pods) in enumerate(case.nodes)]
            for i, p in enumerate(case.pods):
                on = nodes[p.node]["metadata"]["name"]
                away = PREEMPTOR_APP if p.anti else ""
                body = _pod_body(f"v{i}", on, p.cpu_m, class_name(p.priority), {"app": p.app}, p.port, away)
                self.rest.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
                self._running(ns, f"v{i}", REFERENCE - p.start)
            pdbs = self._budgets(ns, case)
            pods = self.rest.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
            before = {p["metadata"]["name"] for p in pods}
            pre = case.pod
            labels = {"app": PREEMPTOR_APP}
            body = _pod_body(
                "preemptor", "", pre.cpu_m, class_name(pre.priority, pre.never), labels, pre.port, pre.anti
            )
            body["spec"]["schedulerName"] = SCHEDULER_NAME
            body["spec"]["nodeSelector"] = {CASE_LABEL: prefix}
            chosen_before = self._victims_chosen()
            created = self.rest.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
            # the reply carries spec.priority (admission resolves the class); the state read above is unchanged
            candidates = preemption_candidates(created, nodes, pods, pdbs)
            node, gone = self._kube_decision(ns, before, chosen_before)
            return PreemptionOutcome(node, gone, best(candidates), candidates, time.monotonic() - t0)
        finally:
            self._delete(prefix, ns)

    def _node(self, name: str, prefix: str, cpu_m: int, pods: int) -> dict[str, Any]:
        alloc = {"cpu": f"{cpu_m}m", "memory": "32Gi", "pods": str(pods), "ephemeral-storage": "100Gi"}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {CASE_LABEL: prefix, "kubernetes.io/hostname": name}},
            "spec": {},
            "status": {
                "allocatable": alloc,
                "capacity": alloc,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
            },
        }
        created = self.rest.call("POST", "/api/v1/nodes", body)
        if created["spec"].get("taints"):  # TaintNodesByCondition adds not-ready; no node controller lifts it
            created = self.rest.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, headers=MERGE)
        return created

    def _running(self, ns: str, name: str, start: int) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start))
        status = {
            "phase": "Running",
            "startTime": stamp,
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
            ],
        }
        self.rest.call("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}/status", {"status": status}, headers=MERGE)

    def _budgets(self, ns: str, case: PreemptionCase) -> list[dict[str, Any]]:
        """Create the case's budgets and wait until the disruption controller's status counts its pods."""
        path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
        for b in case.budgets:
            body = {
                "metadata": {"name": f"pdb-{b.app}"},
                "spec": {"minAvailable": b.min_available, "selector": {"matchLabels": {"app": b.app}}},
            }
            self.rest.call("POST", path, body)
        want = {f"pdb-{a}": sum(1 for p in case.pods if p.app == a) for a in APPS}

        def settled() -> list[dict[str, Any]] | None:
            items = self.rest.call("GET", path)["items"]
            for pdb in items:
                st = pdb.get("status") or {}
                if (
                    st.get("observedGeneration") != pdb["metadata"]["generation"]
                    or st.get("expectedPods", 0) != want[pdb["metadata"]["name"]]
                    or st.get("currentHealthy", 0) != want[pdb["metadata"]["name"]]
                ):
                    return None
            return items

        return self._wait("the disruption controller's PDB status", settled)

    def _victims_chosen(self) -> int:
        """kube-scheduler's running total of victims chosen (``scheduler_preemption_victims`` histogram's sum,
        observed when a preemption starts, before any eviction)."""
        assert self.scheduler is not None
        resp = self.rest.session.get(
            f"https://127.0.0.1:{self.scheduler.port}/metrics", verify=False, timeout=30
        )  # its serving certificate is self-signed; the bearer token is the admin's
        resp.raise_for_status()
        for line in resp.text.splitlines():
            if line.startswith("scheduler_preemption_victims_sum "):
                return round(float(line.split()[1]))
        return 0

    def _kube_decision(self, ns: str, before: set[str], chosen_before: int) -> tuple[str, frozenset[str]]:
        """(node, victims) once kube-scheduler's preemption has evicted every victim it chose (or the pod bound
        without one), ("", {}) when it stays unschedulable without a nomination. Victims are not waited on
        through the pod's bind: a preemptor whose victims were deleted while the preemption was still running
        may wait in kube-scheduler's queue for its periodic flush."""

        def gone_now() -> frozenset[str]:
            return frozenset(before - {p["metadata"]["name"] for p in self._pods(ns)})

        def check() -> tuple[str, frozenset[str]] | None:
            pod = self.rest.call("GET", f"/api/v1/namespaces/{ns}/pods/preemptor")
            status = pod.get("status", {})
            nominated = status.get("nominatedNodeName") or ""
            if nominated:
                want = self._victims_chosen() - chosen_before
                gone = gone_now()
                return (nominated, gone) if want and len(gone) >= want else None
            if pod["spec"].get("nodeName"):
                gone = gone_now()
                return (pod["spec"]["nodeName"] if gone else "", gone)
            for cond in status.get("conditions", []):
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    if cond.get("reason") != "Unschedulable":
                        raise RuntimeError(f"kube-scheduler could not schedule the preemptor: {cond}")
                    return "", frozenset()
            return None

        return self._wait("kube-scheduler's decision on the preemptor", check)

    def _pods(self, ns: str) -> list[dict[str, Any]]:
        return self.rest.call("GET", f"/api/v1/namespaces/{ns}/pods")["items"]

    def _delete(self, prefix: str, ns: str) -> None:
        with contextlib.suppress(Exception):
            self.rest.call("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"}, ok=(404,))
            self.rest.call("DELETE", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", ok=(404,))
            self.rest.call("DELETE", "/api/v1/nodes", params={"labelSelector": f"{CASE_LABEL}={prefix}"})
            self.rest.call("DELETE", f"/api/v1/namespaces/{ns}", ok=(404,))


@contextlib.contextmanager
def preemption_oracle(control_plane: Any) -> Iterator[PreemptionOracle]:
    with PreemptionOracle(control_plane) as o:
        yield o
