"""kubernetes-sigs/descheduler, the rebalancer ``drs-prom rebalance`` is measured against: built, configured, started.

The binary comes from the packaged recipe ``descheduler_recipe/build.sh`` (the Go module proxy, like the control
plane's). It runs as the field runs it for load: the LowNodeUtilization plugin with its Prometheus metrics source,
which reads one PromQL query giving each node's utilisation in 0..1 under the ``instance`` label and evicts, through
the Eviction API, from the nodes above ``targetThresholds`` while some node is below ``thresholds``. Prometheus
gives it no per-pod usage, so it moves one pod per over-utilised node per round, chosen by priority and QoS, not by
how much the pod uses (upstream's behaviour, kept).

Faithful settings, not weakened ones: the query is the node's bottleneck of CPU and memory share (the two signals a
node_exporter has for every node, the first the upstream example's), averaged over the same window the rebalancer
judges hot over; ``targetThresholds`` is the rebalancer's ``hot_above`` and ``thresholds`` its ``cool_below``; the
same eviction budgets per node, namespace and round, minimum pod age, priority limit and namespaces; ``nodeFit`` on
(a pod is evicted only if it fits another node).

Outside a pod the descheduler cannot build a Prometheus client: it authenticates with a token read from a Secret
(made here) and loads a CA from the pod's service-account mount. The recipe points that path, at link time, at
``serviceaccount/ca.crt`` beside the binary, which ``start_descheduler`` writes (any valid CA serves a plain-HTTP
Prometheus); nothing of the host is touched.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import tempfile
from pathlib import Path
from typing import Any

import yaml

from drs_prom.config import RebalanceSettings
from drs_prom.signals import promql
from drs_prom.testbed.build import ControlPlaneError, run_recipe
from drs_prom.testbed.process import LOOPBACK, ManagedProcess

RECIPE = Path(__file__).resolve().parent / "descheduler_recipe"
TOKEN_KEY = "prometheusAuthToken"
"""The key of the Secret the descheduler reads its Prometheus token from (upstream's name)."""


def descheduler_version() -> str:
    """The ``sigs.k8s.io/descheduler`` version pinned in the recipe's go.mod (e.g. ``v0.36.0``)."""
    m = re.search(r"^require\s+sigs\.k8s\.io/descheduler\s+(v\S+)", (RECIPE / "go.mod").read_text(), re.MULTILINE)
    if not m:
        raise ControlPlaneError(f"cannot find the sigs.k8s.io/descheduler version in {RECIPE / 'go.mod'}")
    return m.group(1)


def build_descheduler(timeout: float = 3600.0) -> Path:
    """Build (once; a no-op afterwards) and return the descheduler binary."""
    log_file = Path(tempfile.gettempdir()) / "drs-prom-descheduler-build.log"
    binary = run_recipe(RECIPE / "build.sh", log_file, timeout)
    if not os.access(binary, os.X_OK):
        raise ControlPlaneError(f"the descheduler recipe succeeded but {binary} is not an executable")
    return binary


def utilisation_query(window: str, selector: str = "") -> str:
    """Each node's bottleneck of CPU share (mean over ``window``) and memory share, 0..1, ``instance`` = node name.

    The same node_exporter series drs-prom reads, mapped to node names through node_uname_info as its own queries
    are (``a >= b or b``: the larger of two vectors with the same labels)."""
    cpu, mem = promql.cpu(window, selector), promql.mem(selector)
    both = f"(({cpu}) >= ({mem})) or ({mem})"
    return f'label_replace({both}, "instance", "$1", "{promql.NODE_LABEL}", "(.+)")'


def low_node_utilization_policy(
    rebalance: RebalanceSettings,
    prometheus_url: str,
    query: str,
    token_secret: tuple[str, str],
    node_selector: str | None = None,
) -> dict[str, Any]:
    """A DeschedulerPolicy (v1alpha2) running LowNodeUtilization on ``query``, with ``rebalance``'s thresholds,
    budgets and namespaces (so the two rebalancers are held to the same limits)."""
    args: dict[str, Any] = {
        "thresholds": {"MetricResource": round(rebalance.cool_below * 100)},
        "targetThresholds": {"MetricResource": round(rebalance.hot_above * 100)},
        "metricsUtilization": {"source": "Prometheus", "prometheus": {"query": query}},
    }
    if rebalance.exclude_namespaces:
        args["evictableNamespaces"] = {"exclude": list(rebalance.exclude_namespaces)}
    evictor = {
        "evictLocalStoragePods": rebalance.allow_local_storage,
        "minPodAge": f"{rebalance.min_age_seconds:g}s",
        "priorityThreshold": {"value": rebalance.max_priority},
        "nodeFit": True,  # only a pod that fits some other node is evicted
    }
    if rebalance.namespaces:  # LowNodeUtilization only excludes; the evictor selects by the namespace's name label
        names = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(rebalance.namespaces)}
        evictor["namespaceLabelSelector"] = {"matchExpressions": [names]}
    namespace, name = token_secret
    policy: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "maxNoOfPodsToEvictPerNode": rebalance.max_per_node,
        "maxNoOfPodsToEvictPerNamespace": rebalance.max_per_namespace,
        "maxNoOfPodsToEvictTotal": rebalance.max_per_interval,
        "metricsProviders": [
            {
                "source": "Prometheus",
                "prometheus": {
                    "url": prometheus_url,
                    "authToken": {"secretReference": {"namespace": namespace, "name": name}},
                },
            }
        ],
        "profiles": [
            {
                "name": "load",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": evictor},
                    {"name": "LowNodeUtilization", "args": args},
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
            }
        ],
    }
    if node_selector:
        policy["nodeSelector"] = node_selector
    return policy


def token_secret(namespace: str, name: str) -> dict[str, Any]:
    """The Secret holding the descheduler's Prometheus token (a Prometheus without authentication ignores it)."""
    token = base64.b64encode(secrets.token_hex(16).encode()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": {TOKEN_KEY: token}}  # fmt: skip


def _write_ca(binary: Path, ca_pem: bytes) -> None:
    """The CA file the build linked in (``serviceaccount/ca.crt`` beside the binary), replaced atomically."""
    folder = binary.parent / "serviceaccount"
    folder.mkdir(exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder)
    with os.fdopen(fd, "wb") as f:
        f.write(ca_pem)
    os.replace(tmp, folder / "ca.crt")


def descheduler_argv(binary: Path, kubeconfig: Path, policy_file: Path, interval_seconds: float) -> list[str]:
    """One round and exit when ``interval_seconds`` is 0, else a round every interval; no metrics port, no leader
    election (one replica, as the testbed runs it)."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--policy-config-file={policy_file}",
        f"--descheduling-interval={interval_seconds:g}s",
        "--disable-metrics",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        "--secure-port=0",
        "--v=3",
    ]


def start_descheduler(
    binary: Path,
    workdir: Path,
    kubeconfig: Path,
    ca_pem: bytes,
    policy: dict[str, Any],
    interval_seconds: float,
    name: str = "descheduler",
) -> ManagedProcess:
    """Write the policy and the CA, start the descheduler; its log is ``workdir/<name>.log``."""
    workdir.mkdir(parents=True, exist_ok=True)
    _write_ca(binary, ca_pem)
    policy_file = workdir / f"{name}-policy.yaml"
    policy_file.write_text(yaml.safe_dump(policy, sort_keys=False))
    argv = descheduler_argv(binary, kubeconfig, policy_file, interval_seconds)
    return ManagedProcess(name, argv, workdir / f"{name}.log")
