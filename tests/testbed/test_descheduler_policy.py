"""The descheduler the rebalancer is measured against is configured as the rebalancer is: same thresholds, budgets,
ages, priorities and namespaces; its query gives every node's utilisation under the node's name."""

from __future__ import annotations

from pathlib import Path

from drs_prom.config import Settings
from drs_prom.signals import promql
from drs_prom.testbed.descheduler import (
    TOKEN_KEY,
    descheduler_argv,
    descheduler_version,
    low_node_utilization_policy,
    token_secret,
    utilisation_query,
)


def _policy(**rebalance):
    r = Settings.model_validate({"rebalance": rebalance}).rebalance
    return low_node_utilization_policy(r, "http://127.0.0.1:9090", "q", ("ns", "tok"), node_selector="a=b"), r


def _plugin(policy, name):
    (profile,) = policy["profiles"]
    return next(c["args"] for c in profile["pluginConfig"] if c["name"] == name)


def test_the_policy_holds_the_descheduler_to_the_rebalancers_settings():
    policy, r = _policy(hot_above=0.85, cool_below=0.6, max_per_node=1, max_per_namespace=3, max_per_interval=4,
                        min_age_seconds=900, max_priority=1000, namespaces=["web", "api"])  # fmt: skip
    low = _plugin(policy, "LowNodeUtilization")
    assert low["targetThresholds"] == {"MetricResource": 85} and low["thresholds"] == {"MetricResource": 60}
    assert low["metricsUtilization"] == {"source": "Prometheus", "prometheus": {"query": "q"}}
    assert (policy["maxNoOfPodsToEvictPerNode"], policy["maxNoOfPodsToEvictPerNamespace"]) == (1, 3)
    assert policy["maxNoOfPodsToEvictTotal"] == 4 and policy["nodeSelector"] == "a=b"
    evictor = _plugin(policy, "DefaultEvictor")
    assert evictor["minPodAge"] == "900s" and evictor["priorityThreshold"] == {"value": 1000} and evictor["nodeFit"]
    (sel,) = evictor["namespaceLabelSelector"]["matchExpressions"]
    assert sel == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["web", "api"]}
    assert low["evictableNamespaces"] == {"exclude": list(r.exclude_namespaces)}
    (provider,) = policy["metricsProviders"]
    assert provider["prometheus"]["authToken"] == {"secretReference": {"namespace": "ns", "name": "tok"}}
    assert policy["profiles"][0]["plugins"] == {"balance": {"enabled": ["LowNodeUtilization"]}}


def test_without_namespaces_every_namespace_but_the_excluded_is_evictable():
    policy, _ = _policy(exclude_namespaces=["kube-system", "infra"])
    assert "namespaceLabelSelector" not in _plugin(policy, "DefaultEvictor")
    assert _plugin(policy, "LowNodeUtilization")["evictableNamespaces"] == {"exclude": ["kube-system", "infra"]}


def test_the_query_is_the_larger_of_cpu_and_memory_share_named_by_node():
    q = utilisation_query("5m")
    assert q.startswith("label_replace(") and f'"{promql.NODE_LABEL}"' in q and '"instance"' in q
    assert promql.cpu("5m") in q and promql.mem() in q and ">=" in q


def test_the_token_secret_and_the_command_line():
    body = token_secret("ns", "tok")
    assert body["metadata"] == {"name": "tok", "namespace": "ns"} and set(body["data"]) == {TOKEN_KEY}
    argv = descheduler_argv(Path("/x/descheduler"), Path("k"), Path("p"), 0)
    assert "--descheduling-interval=0s" in argv and "--leader-elect=false" in argv and "--secure-port=0" in argv
    assert descheduler_version().startswith("v0.")
