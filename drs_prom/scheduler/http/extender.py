"""``drs-prom extender``: drs-prom's filter and scores as a kube-scheduler HTTP extender.

A cluster keeps the stock kube-scheduler and adds, in its KubeSchedulerConfiguration::

    extenders:
    - urlPrefix: http://drs-extender.drs-system:8888
      filterVerb: filter
      prioritizeVerb: prioritize
      weight: 5
      nodeCacheCapable: true

JSON follows k8s.io/kube-scheduler/extender/v1: ``ExtenderArgs`` {Pod, Nodes, NodeNames}
in, ``ExtenderFilterResult`` {Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes,
Error} and ``HostPriorityList`` [{Host, Score}] (0..10) out. With ``nodeCacheCapable``
the scheduler sends only names and we answer with names, resolving nodes from our own
watch cache; without it, full Node objects come and go. Either way the bound-pod
requests come from our pod watch when we have one (a cache-less extender treats nodes
as empty, which can only make the filter more lenient than kube-scheduler's own).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import numpy as np
from prometheus_client import Counter, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from drs_prom.config import ServingSettings
from drs_prom.constraints import chain, placed
from drs_prom.scheduler.decision.decide import Decider
from drs_prom.scheduler.decision.pod_demand import DemandResolver
from drs_prom.scheduler.http.server import BackgroundServer, QuietHandler, RequestRejected
from drs_prom.scheduler.watch import kube
from drs_prom.scheduler.watch.cache import ClusterCache
from drs_prom.types import KubeClient, NodeInfo

log = logging.getLogger(__name__)

MAX_EXTENDER_PRIORITY = 10


def _get(d: dict[str, Any], name: str) -> Any:
    """ExtenderArgs fields are Go names (``Pod``); accept lower-case too."""
    return d.get(name, d.get(name[0].lower() + name[1:]))


def scale_scores(scores: np.ndarray) -> list[int]:
    """Policy scores -> 0..10 integers (min-max over the finite ones; -inf/NaN -> 0)."""
    s = np.asarray(scores, dtype=np.float64)
    finite = np.isfinite(s)
    out = np.zeros(len(s), dtype=np.int64)
    if finite.any():
        lo, hi = s[finite].min(), s[finite].max()
        if hi > lo:
            out[finite] = np.rint((s[finite] - lo) / (hi - lo) * MAX_EXTENDER_PRIORITY).astype(np.int64)
        else:
            out[finite] = MAX_EXTENDER_PRIORITY
    return [int(v) for v in out]


class Extender:
    def __init__(
        self, decider: Decider, cache: ClusterCache | None = None, demands: DemandResolver | None = None
    ) -> None:
        """``demands``: the pods' expected load (drs_prom.scheduler.decision.pod_demand); None: annotations and
        requests only, counted in the decider's registry."""
        self.decider = decider
        self.cache = cache
        reg = decider.metrics.registry
        self.demands = demands or DemandResolver(registry=reg)
        self.requests = Counter(
            "drs_extender_requests_total", "Extender calls by verb and result.", ["verb", "result"], registry=reg
        )

    # -- the two verbs (pure over their JSON, apart from the cache) -----------------
    def _nodes(self, args: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, str], bool]:
        """(node objects, names we cannot resolve -> reason, whether the caller sent names only)."""
        node_list = _get(args, "Nodes")
        if node_list is not None and (node_list.get("items") is not None or not _get(args, "NodeNames")):
            return list(node_list.get("items") or []), {}, False
        names = _get(args, "NodeNames") or []
        known = self.cache.nodes if self.cache is not None else {}
        looked = [(n, known.get(n)) for n in names]  # one lookup per named node, not a copy of the whole cache
        found = [obj for _, obj in looked if obj is not None]
        missing = {n: "node not in drs-prom extender cache" for n, obj in looked if obj is None}
        return found, missing, True

    def _infos(self, node_objs: list[dict[str, Any]]) -> list[NodeInfo]:
        """NodeInfo of each node sent, from the watch cache's node table where it has the node (with the requests
        of the pods bound and assumed there), else parsed from what was sent.

        Only the named nodes are built, and the table keeps each built NodeInfo until its node's requests change,
        so the prioritize call that follows a filter call for the same pod reuses what the filter built."""
        names = [obj["metadata"]["name"] for obj in node_objs]
        if self.cache is None or not self.cache.synced:
            return [kube.to_node_info(obj) for obj in node_objs]
        view = self.cache.view()
        rows = [view.table.index.get(name) for name in names]
        built = iter(view.infos([i for i in rows if i is not None]))
        return [next(built) if i is not None else kube.to_node_info(obj) for obj, i in zip(node_objs, rows)]

    def filter(self, args: dict[str, Any]) -> dict[str, Any]:
        pod = _get(args, "Pod") or {}
        node_objs, failed, names_only = self._nodes(args)
        # kube-scheduler calling us has already run the volume and DynamicResources filters drs-prom's own
        # scheduler refuses pods for: here they are its job, not a reason to turn the pod away
        req = dataclasses.replace(kube.to_pod_request(pod), unsupported=(), claims=())
        infos = self._infos(node_objs)
        near = self.cache.neighbours() if self.cache is not None and self.cache.synced else placed.EMPTY
        result = chain.filter_all(req, infos, near)
        keep = [obj for obj, ok in zip(node_objs, result.mask) if ok]
        for info, reasons in zip(infos, result.reasons):
            if reasons:
                failed[info.name] = ", ".join(reasons)
        out: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": {}, "Error": ""}
        if names_only:
            out["NodeNames"] = [o["metadata"]["name"] for o in keep]
            out["Nodes"] = None
        else:
            out["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": keep}
            out["NodeNames"] = None
        return out

    def prioritize(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        pod = _get(args, "Pod") or {}
        node_objs, _, _ = self._nodes(args)
        if not node_objs:
            return []
        demand = self.demands.resolve(pod)
        req = kube.to_pod_request(pod, demand.demand, demand.source)
        infos = self._infos(node_objs)
        feasible = np.ones(len(infos), dtype=bool)  # kube-scheduler only prioritises nodes that passed filtering
        choice = self.decider.decide(req, demand.demand, infos, feasible)
        return [{"Host": n.name, "Score": s} for n, s in zip(infos, scale_scores(choice.scores))]


def check_args(args: Any) -> dict[str, Any]:
    """ExtenderArgs with the shape kube-scheduler sends, or RequestRejected(400) naming the field.

    Checked before any work so that a stranger's body costs one JSON parse: Pod an object;
    Nodes null or an object whose items are objects; NodeNames null or a list of strings.
    """
    if not isinstance(args, dict):
        raise RequestRejected(400, f"ExtenderArgs must be a JSON object, got {type(args).__name__}")
    pod = _get(args, "Pod")
    if pod is not None and not isinstance(pod, dict):
        raise RequestRejected(400, "Pod must be an object")
    nodes = _get(args, "Nodes")
    if nodes is not None:
        items = nodes.get("items") if isinstance(nodes, dict) else None
        if not isinstance(nodes, dict) or not (items is None or isinstance(items, list)):
            raise RequestRejected(400, "Nodes must be a NodeList object")
        for item in items or []:
            if not isinstance(item, dict) or not isinstance((item.get("metadata") or {}).get("name"), str):
                raise RequestRejected(400, "every node in Nodes.items needs metadata.name")
    names = _get(args, "NodeNames")
    if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise RequestRejected(400, "NodeNames must be a list of strings")
    return args


class ExtenderServer(BackgroundServer):
    """HTTP(S) front: POST /filter, POST /prioritize; GET /metrics, /healthz, /readyz.

    Error answers are what kube-scheduler's HTTPExtender understands: any status but 200
    is an error ("failed ... with extender at URL ..., code N") and a 200 filter answer
    with ``Error`` set is one too; the body always carries ``{"Error": "..."}`` for people.
    A malformed body is 400, an oversized one 413 (the connection is then closed unread),
    a missing length 411; a verb that raised is 200+Error (filter) or 500 (prioritize).
    """

    def __init__(
        self, extender: Extender, listen: str, serving: ServingSettings | None = None, api_client: KubeClient = None
    ) -> None:
        ext = self.extender = extender
        registry = extender.decider.metrics.registry

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                verb = self.path.split("?")[0].strip("/").split("/")[-1]
                if verb not in ("filter", "prioritize"):
                    ext.requests.labels("unknown", "unknown").inc()
                    self.close_connection = True  # the body is not read
                    return self._send(404, {"Error": f"unknown verb {verb[:40]!r}"})
                try:
                    args = check_args(json.loads(self.read_body() or b"{}"))
                except RequestRejected as exc:
                    ext.requests.labels(verb, "rejected").inc()
                    return self._send(exc.status, {"Error": str(exc)})
                except (ValueError, RecursionError) as exc:  # not JSON (UnicodeDecodeError is a ValueError)
                    ext.requests.labels(verb, "rejected").inc()
                    return self._send(400, {"Error": f"body is not JSON: {str(exc)[:120]}"})
                try:
                    body: Any = ext.filter(args) if verb == "filter" else ext.prioritize(args)
                except Exception as exc:  # noqa: BLE001 - answer with Error rather than dropping the connection
                    log.warning("extender %s failed: %s: %s", verb, type(exc).__name__, str(exc)[:200])
                    ext.requests.labels(verb, "error").inc()
                    return self._send(
                        200 if verb == "filter" else 500, {"Error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                    )
                ext.requests.labels(verb, "ok").inc()
                return self._send(200, body)

            def do_GET(self) -> None:
                self.request_complete()
                path = self.path.split("?")[0]
                if path == "/metrics":
                    if self.guard(path):
                        self._raw(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok = path == "/healthz" or ext.cache is None or ext.cache.synced
                    self._raw(200 if ok else 503, b"ok" if ok else b"not ready", "text/plain")
                else:
                    self._raw(404, b"not found", "text/plain")

            def _send(self, code: int, obj: Any) -> None:
                self._raw(code, json.dumps(obj).encode(), "application/json")

        super().__init__(listen, Handler, "drs-extender", serving, api_client)
