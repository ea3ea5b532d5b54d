"""Properties of everything the scheduler and the extender read from a pod or node object:
quantities, requests, annotations, pod -> PodRequest, and the filters against an
independent reference (tests/properties/k8s_objects.py). The ``@example`` rows are the
inputs Hypothesis found that broke the code before it was fixed."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from drs_prom.constraints import chain
from drs_prom.features import FEATURES
from drs_prom.scheduler.decision.pod_demand import DEMAND_SOURCES, parse_demand, resolve
from drs_prom.scheduler.watch import kube
from drs_prom.types import PodRequest
from drs_prom.usage import owners
from tests.properties.k8s_objects import INT64_MAX, nodes, pods, quantity_text, ref_feasible, ref_quantity, ref_requests

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _container(cpu: object) -> dict:
    return {"name": "c", "resources": {"requests": {"cpu": cpu}}}


@given(quantity_text)
@example("Infinity")  # the kubernetes client's parser accepted it; ceil() then raised OverflowError
@example(" 1")  # and these, which resource.ParseQuantity refuses
@example("1_0")
@example("\u0661")
@example("1e999999999")  # ceil() of this Decimal builds a billion-digit int: a CPU/memory bomb
def test_quantity_follows_the_go_grammar(q: object) -> None:
    want = ref_quantity(q)
    if want is None:
        with pytest.raises(ValueError):
            kube.parse_quantity(q)
    else:
        assert kube.parse_quantity(q) == want


@given(quantity_text)
@example("1e999999999")
@example("Infinity")
def test_amounts_are_bounded_ints(q: object) -> None:
    """cpu_millis / mem_bytes: an int64 or ValueError, never OverflowError or a huge int."""
    for fn in (kube.cpu_millis, kube.mem_bytes):
        try:
            v = fn(q)
        except ValueError:
            continue
        assert isinstance(v, int) and abs(v) <= INT64_MAX


@given(pods)
@example(  # a negative request cancelled another container's: the pod looked free
    {"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [_container("2"), _container("-2")]}}
)
@example(  # a sidecar (restartable init container) runs beside the containers: its request adds
    {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [_container("1")], "initContainers": [{**_container("1"), "restartPolicy": "Always"}]},
    }
)
def test_pod_requests_match_reference(pod: dict) -> None:
    assert kube.pod_requests(pod) == ref_requests(pod)


@given(pods, st.lists(nodes, min_size=1, max_size=4))
@example(  # a node label literally named metadata.name spoofed matchFields (and Exists on it matched every node)
    {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "metadata.name", "operator": "Exists"}]}]
                    }
                }
            },
        },
    },
    [
        {
            "metadata": {"name": "n1", "labels": {}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "1", "memory": "1", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    ],
)
@example(  # Gt parsed "1_0" as 10 (Python int()); Go's ParseInt refuses it
    {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "Gt", "values": ["5"]}]}
                        ]
                    }
                }
            },
        },
    },
    [
        {
            "metadata": {"name": "n1", "labels": {"zone": "1_0"}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "1", "memory": "1", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    ],
)
@example(  # an unknown toleration operator ("exists") compared values instead of tolerating nothing
    {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c"}], "tolerations": [{"key": "gpu", "operator": "exists", "value": "a"}]},
    },
    [
        {
            "metadata": {"name": "n1", "labels": {}},
            "spec": {"taints": [{"key": "gpu", "value": "a", "effect": "NoSchedule"}]},
            "status": {
                "allocatable": {"cpu": "1", "memory": "1", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    ],
)
def test_filters_agree_with_the_reference(pod: dict, node_objs: list[dict]) -> None:
    """Feasible exactly when kube-scheduler's semantics say so: never when the spec forbids it."""
    req = kube.to_pod_request(pod)
    infos = [kube.to_node_info(n) for n in node_objs]
    result = chain.filter_all(req, infos)
    for node, ok, reasons in zip(node_objs, result.mask, result.reasons):
        assert bool(ok) == ref_feasible(pod, node), (node, reasons)
        assert bool(ok) == (not reasons)
    assert chain.failure_message(result).startswith(f"{int(result.mask.sum())}/{len(node_objs)} nodes")


@given(json_values)
@example({"spec": {"priority": "high"}})  # int("high") escaped as a bare ValueError text; now one clear line
@example({"metadata": []})  # AttributeError: 'list' object has no attribute 'get'
@example({"spec": {"containers": [1]}})
def test_any_json_is_a_pod_request_or_one_value_error(obj: object) -> None:
    """What a stranger can POST as ExtenderArgs.Pod: a PodRequest with sane requests, or ValueError."""
    try:
        req = kube.to_pod_request(obj)  # type: ignore[arg-type]
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(req, PodRequest)
    assert 0 <= req.cpu_m <= INT64_MAX and 0 <= req.mem_bytes <= INT64_MAX
    assert isinstance(req.name, str) and isinstance(req.priority, int)


@given(json_values)
@example({"status": {"allocatable": {"cpu": "Infinity"}}})
@example({"metadata": {"labels": []}})
def test_any_json_is_a_node_info_or_one_value_error(obj: object) -> None:
    try:
        info = kube.to_node_info(obj)  # type: ignore[arg-type]
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert 0 <= info.allocatable_cpu_m <= INT64_MAX and 0 <= info.allocatable_mem_bytes <= INT64_MAX
    assert isinstance(info.name, str)


demand_entries = st.dictionaries(st.sampled_from(FEATURES), st.integers(0, 10**9), max_size=6)


@given(demand_entries)
def test_demand_annotation_round_trips(entries: dict[str, int]) -> None:
    text = ",".join(f"{k}={v}" for k, v in entries.items())
    assert parse_demand(text) == tuple(float(entries.get(f, 0)) for f in FEATURES)


@given(st.text(max_size=40) | st.builds(lambda k, q: f"{k}={q}", st.sampled_from(FEATURES + ("x",)), quantity_text))
@example("cpu=Infinity")  # an infinite demand poisoned every score (inf - inf = NaN)
@example("cpu=1e999999999")
@example("mem=-0")
def test_demand_annotation_is_finite_or_value_error(text: str) -> None:
    try:
        demand = parse_demand(text)
    except ValueError as exc:
        assert "\n" not in str(exc)
        return
    assert len(demand) == len(FEATURES)
    assert all(math.isfinite(v) and v >= 0 for v in demand)


@given(st.dictionaries(st.sampled_from(["drs.io/demand", "drs.io/profile", "other"]), st.text(max_size=30)), pods)
@example({"drs.io/demand": "cpu=Infinity"}, {"metadata": {}, "spec": {"containers": []}})
def test_resolve_never_raises_and_is_finite(annotations: dict[str, str], pod: dict) -> None:
    pod = {**pod, "metadata": {**pod["metadata"], "annotations": annotations}}
    got = resolve(pod)
    assert got.source in DEMAND_SOURCES
    assert owners.top_owner(pod).partition("/")[1] == "/"  # odd owner references read as the pod itself
    assert len(got.demand) == len(FEATURES) and all(math.isfinite(v) and v >= 0 for v in got.demand)
