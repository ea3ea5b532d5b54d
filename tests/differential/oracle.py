"""kube-scheduler as the oracle of feasibility, and drs-prom's answer on the same objects.

The real kube-scheduler runs with one profile of its own (``drs-diff``, so it only sees the
pods made here) and a filter extender (``nodeCacheCapable: false``) that is a small HTTP recorder
on loopback: kube-scheduler sends an extender exactly the nodes that passed its own filters, so
what the recorder receives for a pod is kube-scheduler's feasible set. When its filters leave no
node, it calls no extender and marks the pod ``PodScheduled=False`` (reason ``Unschedulable``):
the set is empty.

Each case gets a fresh pair of namespaces and its own nodes (name-prefixed), created, read back
from the apiserver's replies and deleted afterwards. Before the pod is created the oracle waits
for kube-scheduler's caches to hold the whole case: a sentinel node, patched after every case
object was written, must reach the recorder at that resourceVersion through a probe pod (a
watch delivers events in resourceVersion order, so every earlier node event was seen too; the
probe is created after the bound pods, on the pods' watch).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from drs_prom.constraints.framework import unsupported_reason
from tests.differential.cases import RUNTIME_CLASS, RUNTIME_OVERHEAD, Case, materialize, placeholders

SCHEDULER_NAME = "drs-diff"
CASE_LABEL = "drs-diff/case"
SENTINEL = "drs-diff-sentinel"
SENTINEL_TAINT = {"key": "drs-diff/sentinel", "value": "true", "effect": "NoSchedule"}
PROBE_LABEL = "drs-diff/probe"
WAIT_SECONDS = 30.0
POLL_SECONDS = 0.01

FeasibleFn = Callable[..., Mapping[str, tuple[str, ...]]]
REFUSAL_PREFIX = unsupported_reason(["X"]).split("X")[0]
"""How drs_prom.constraints.interpod.unsupported_reason starts: the reason of a pod drs-prom refuses outright."""


# -- the recorder kube-scheduler calls ------------------------------------------------------


class Recorder:
    """The filter extender: records, per pod uid, the names (and resourceVersions) of the nodes
    kube-scheduler sends, and lets every node through but the sentinel."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, str]] = {}
        self.changed = threading.Condition()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                nodes = (body.get("nodes") or body.get("Nodes") or {}).get("items") or []
                versions = {n["metadata"]["name"]: n["metadata"].get("resourceVersion", "") for n in nodes}
                uid = (body.get("pod") or body.get("Pod") or {})["metadata"]["uid"]
                with recorder.changed:
                    recorder.seen[uid] = versions
                    recorder.changed.notify_all()
                passed = [{"metadata": {"name": n}} for n in versions if n != SENTINEL]
                failed = {SENTINEL: "sentinel"} if SENTINEL in versions else {}
                reply = json.dumps({"nodes": {"items": passed}, "failedNodes": failed}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="diff-recorder", daemon=True)
        self._thread.start()

    def get(self, uid: str) -> dict[str, str] | None:
        with self.changed:
            return self.seen.pop(uid, None)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)


def scheduler_config(port: int) -> str:
    """One profile, every node looked at (percentageOfNodesToScore 100), the recorder as filter extender."""
    return f"""
percentageOfNodesToScore: 100
profiles:
  - schedulerName: {SCHEDULER_NAME}
extenders:
  - urlPrefix: http://127.0.0.1:{port}
    filterVerb: filter
    nodeCacheCapable: false
    enableHTTPS: false
    httpTimeout: 10s
"""


# -- one case --------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Both feasible sets of one case (real node names), and drs-prom's reasons per node."""

    kube: frozenset[str]
    drs: frozenset[str]
    reasons: dict[str, tuple[str, ...]]
    names: dict[str, str]
    kube_message: str = ""
    seconds: float = 0.0

    @property
    def agree(self) -> bool:
        return self.kube == self.drs

    @property
    def refused(self) -> bool:
        """drs-prom refused the pod outright as needing what it does not check (a DynamicResources claim):
        it binds nothing and its FailedScheduling event says to run kube-scheduler with drs-prom as extender. A documented refusal, counted apart, not a filter that
        disagrees; it never makes drs-prom accept a node kube-scheduler refuses."""
        return (
            not self.drs
            and bool(self.reasons)
            and all(r and r[0].startswith(REFUSAL_PREFIX) for r in self.reasons.values())
        )

    @property
    def consistent(self) -> bool:
        """Agreement, or a documented refusal of the whole pod."""
        return self.agree or self.refused

    def describe(self) -> str:
        """Which placeholder nodes differ, and what each side said about them."""
        back = {v: k for k, v in self.names.items()}
        lines = []
        for name in sorted(self.kube - self.drs):
            lines.append(
                f"  {back.get(name, name)}: kube-scheduler feasible, drs-prom refuses: {self.reasons.get(name)}"
            )
        for name in sorted(self.drs - self.kube):
            lines.append(f"  {back.get(name, name)}: drs-prom feasible, kube-scheduler refuses")
        if self.kube_message and self.drs - self.kube:
            lines.append(f"  kube-scheduler: {self.kube_message}")
        return "\n".join(lines)


@dataclass
class Rest:
    """The apiserver as plain JSON over one keep-alive session (fast, and the replies are the objects)."""

    server: str
    token: str
    ca_file: str
    session: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self.session.headers["Authorization"] = f"Bearer {self.token}"
        self.session.verify = self.ca_file
        self.session.trust_env = False  # no proxy and no REQUESTS_CA_BUNDLE in place of the cluster's CA

    def call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (), **kw: Any) -> dict[str, Any]:
        resp = self.session.request(method, f"{self.server}{path}", json=body, timeout=30, **kw)
        if resp.status_code >= 300 and resp.status_code not in ok:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text[:500]}")
        return resp.json() if resp.content else {}


class Oracle:
    """Runs cases on a started ``ControlPlane``: its own kube-scheduler, recorder and sentinel node."""

    def __init__(self, control_plane: Any, feasible: FeasibleFn) -> None:
        self.cp = control_plane
        self.feasible = feasible
        self.rest = Rest(control_plane.server, control_plane.admin_token, str(control_plane.ca_file))
        self.recorder = Recorder()
        self.counter = itertools.count()
        self.run_id = f"{int(time.time()) % 100000:05d}"
        self.scheduler = None
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        self.rest.call(
            "POST",
            "/apis/node.k8s.io/v1/runtimeclasses",
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "runc",
                "overhead": {"podFixed": RUNTIME_OVERHEAD},
            },
            ok=(409,),
        )
        self._create_node(
            {
                "metadata": {"name": SENTINEL, "labels": {SENTINEL_TAINT["key"]: "true"}},
                "spec": {"taints": [SENTINEL_TAINT]},
                "status": {
                    "allocatable": {"cpu": "1k", "memory": "1Ti", "pods": "10k"},
                    "capacity": {"cpu": "1k", "memory": "1Ti", "pods": "10k"},
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
                },
            }
        )
        self.scheduler = self.cp.start_kube_scheduler(scheduler_config(self.recorder.port))

    def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        with contextlib.suppress(Exception):
            self.rest.call("DELETE", f"/api/v1/nodes/{SENTINEL}", ok=(404,))
        self.recorder.stop()
        self.rest.session.close()

    def __enter__(self) -> Oracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- objects -----------------------------------------------------------------------------
    def _create_node(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a node with its status in one call, then put back exactly its taints (the
        TaintNodesByCondition admission plugin adds not-ready to every new node)."""
        created = self.rest.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", **body})
        if created["spec"].get("taints") != body["spec"].get("taints"):
            created = self.rest.call(
                "PATCH",
                f"/api/v1/nodes/{body['metadata']['name']}",
                {"spec": {"taints": body["spec"].get("taints")}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        if not created.get("status", {}).get("allocatable"):  # an apiserver that drops status on create
            created = self.rest.call(
                "PATCH",
                f"/api/v1/nodes/{body['metadata']['name']}/status",
                {"status": body["status"]},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        return created

    def _wait(self, what: str, check: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if (got := check()) is not None:
                return got
            time.sleep(POLL_SECONDS)
        raise TimeoutError(f"timed out after {WAIT_SECONDS:.0f}s waiting for {what}")

    def _sync(self, namespace: str) -> None:
        """Wait until kube-scheduler's caches hold every object written so far (module docstring)."""
        sentinel = self.rest.call(
            "PATCH",
            f"/api/v1/nodes/{SENTINEL}",
            {"metadata": {"annotations": {"drs-diff/seq": str(next(self.counter))}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        want = int(sentinel["metadata"]["resourceVersion"])
        for attempt in range(20):
            probe = self.rest.call(
                "POST",
                f"/api/v1/namespaces/{namespace}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"probe-{attempt}", "labels": {PROBE_LABEL: "true"}},
                    "spec": {
                        "schedulerName": SCHEDULER_NAME,
                        "nodeSelector": {SENTINEL_TAINT["key"]: "true"},
                        "tolerations": [{**SENTINEL_TAINT, "operator": "Equal"}],
                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                        "terminationGracePeriodSeconds": 0,
                    },
                },
            )
            seen = self._wait("the sync probe", lambda uid=probe["metadata"]["uid"]: self.recorder.get(uid))
            if int(seen.get(SENTINEL, "0") or 0) >= want:
                return
        raise TimeoutError("kube-scheduler's node cache never caught up with the sentinel node")

    def _kube_set(self, pod: Mapping[str, Any], namespace: str) -> tuple[dict[str, str], str]:
        """Nodes (name -> resourceVersion) that passed kube-scheduler's filters, and its message when none did."""
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]

        def check() -> tuple[dict[str, str], str] | None:
            if (got := self.recorder.get(uid)) is not None:
                return got, ""
            status = self.rest.call("GET", f"/api/v1/namespaces/{namespace}/pods/{name}").get("status", {})
            for cond in status.get("conditions", []):
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                    if cond.get("reason") != "Unschedulable":
                        raise RuntimeError(f"kube-scheduler could not schedule {name}: {cond}")
                    if (got := self.recorder.get(uid)) is not None:  # a retry may have reached the extender
                        return got, ""
                    return {}, cond.get("message", "")
            return None

        return self._wait(f"kube-scheduler's decision on {name}", check)

    def run(self, case: Case, feasible: FeasibleFn | None = None) -> Outcome:
        """Create the case, ask kube-scheduler and ``feasible`` (the oracle's own by default), delete the case."""
        t0 = time.monotonic()
        prefix = f"d{self.run_id}-{next(self.counter)}"
        names = placeholders(case, prefix)
        ns, ons = names["@ns"], names["@ons"]
        try:
            namespaces = [self.rest.call("POST", "/api/v1/namespaces", materialize(n, names)) for n in case.namespaces]
            nodes = []
            for body in case.nodes:
                body = materialize(body, names)
                body["metadata"]["labels"][CASE_LABEL] = prefix
                nodes.append(self._create_node(body))
            storage = self._create_storage(case, names)
            pods = [
                self.rest.call("POST", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p)
                for p in (materialize(p, names) for p in case.pods)
            ]
            self._sync(ns)
            body = materialize(case.pod, names)
            body["spec"]["schedulerName"] = SCHEDULER_NAME
            # only this case's nodes: other nodes of a shared control plane (and the sentinel) stay out
            body["spec"]["nodeSelector"] = {**body["spec"].get("nodeSelector", {}), CASE_LABEL: prefix}
            pod = self.rest.call("POST", f"/api/v1/namespaces/{ns}/pods", body)
            seen, message = self._kube_set(pod, ns)
            case_nodes = {n["metadata"]["name"]: n["metadata"]["resourceVersion"] for n in nodes}
            stale = {n for n, rv in seen.items() if n in case_nodes and rv != case_nodes[n]}
            if stale:
                raise RuntimeError(f"kube-scheduler decided on stale versions of {sorted(stale)}")
            reasons = dict((feasible or self.feasible)(pod, nodes, pods, namespaces=namespaces, **storage))
            return Outcome(
                kube=frozenset(n for n in seen if n in case_nodes),
                drs=frozenset(n for n, r in reasons.items() if not r),
                reasons=reasons,
                names=names,
                kube_message=message,
                seconds=time.monotonic() - t0,
            )
        finally:
            self._delete(prefix, (ns, ons), case, names)

    def _create_storage(self, case: Case, names: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
        """StorageClasses, volumes and claims with the status the PV controller would write (no
        controller runs here); the replies, as ``feasible_nodes`` takes them."""
        classes = [
            self.rest.call("POST", "/apis/storage.k8s.io/v1/storageclasses", materialize(sc, names))
            for sc in case.storage_classes
        ]
        pvs = []
        for body in case.pvs:
            body = materialize(body, names)
            self.rest.call("POST", "/api/v1/persistentvolumes", body)
            pvs.append(self._patch_status(f"/api/v1/persistentvolumes/{body['metadata']['name']}", body["status"]))
        pvcs = []
        for body in case.pvcs:
            body = materialize(body, names)
            path = f"/api/v1/namespaces/{body['metadata']['namespace']}/persistentvolumeclaims"
            self.rest.call("POST", path, body)
            pvcs.append(self._patch_status(f"{path}/{body['metadata']['name']}", body["status"]))
        csi_nodes = [
            self.rest.call("POST", "/apis/storage.k8s.io/v1/csinodes", materialize(c, names)) for c in case.csi_nodes
        ]
        attachments = [
            self.rest.call("POST", "/apis/storage.k8s.io/v1/volumeattachments", materialize(va, names))
            for va in case.attachments
        ]
        return {
            "pvcs": pvcs,
            "pvs": pvs,
            "storage_classes": classes,
            "csi_nodes": csi_nodes,
            "volume_attachments": attachments,
        }

    def _patch_status(self, path: str, status: Mapping[str, Any]) -> dict[str, Any]:
        return self.rest.call(
            "PATCH", f"{path}/status", {"status": status}, headers={"Content-Type": "application/merge-patch+json"}
        )

    def _delete(self, prefix: str, namespaces: tuple[str, ...], case: Case, names: Mapping[str, str]) -> None:
        for ns in namespaces:
            self.rest.call("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"}, ok=(404,))
        self.rest.call("DELETE", "/api/v1/nodes", params={"labelSelector": f"{CASE_LABEL}={prefix}"})
        # claims and volumes carry protection finalizers that only controllers absent here would lift
        paths = [
            f"/api/v1/namespaces/{namespaces[0]}/persistentvolumeclaims/{c['metadata']['name']}" for c in case.pvcs
        ]
        paths += [f"/api/v1/persistentvolumes/{names[pv['metadata']['name']]}" for pv in case.pvs]
        paths += [
            f"/apis/storage.k8s.io/v1/storageclasses/{names[sc['metadata']['name']]}" for sc in case.storage_classes
        ]
        paths += [f"/apis/storage.k8s.io/v1/csinodes/{names[c['metadata']['name']]}" for c in case.csi_nodes]
        paths += [
            f"/apis/storage.k8s.io/v1/volumeattachments/{names[va['metadata']['name']]}" for va in case.attachments
        ]
        for path in paths:
            self.rest.call(
                "PATCH",
                path,
                {"metadata": {"finalizers": None}},
                ok=(404,),
                headers={"Content-Type": "application/merge-patch+json"},
            )
            self.rest.call("DELETE", path, ok=(404,))
        for ns in namespaces:
            self.rest.call("DELETE", f"/api/v1/namespaces/{ns}", ok=(404,))


@contextlib.contextmanager
def oracle(control_plane: Any, feasible: FeasibleFn) -> Iterator[Oracle]:
    with Oracle(control_plane, feasible) as o:
        yield o
