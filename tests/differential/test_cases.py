"""The generated cases are what the apiserver takes and what the oracle can name back, without a cluster."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from tests.differential.cases import (
    ADAPTER_FEATURES,
    ALL_FEATURES,
    Case,
    cases,
    materialize,
    parse_features,
    placeholders,
)


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in _strings(v)]
    return []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(ALL_FEATURES))
def test_every_placeholder_is_named_and_objects_are_valid(case: Case) -> None:
    names = placeholders(case, "d1-7")
    objects = materialize(
        [
            case.namespaces,
            case.nodes,
            case.pods,
            case.pod,
            case.storage_classes,
            case.pvs,
            case.pvcs,
            case.csi_nodes,
            case.attachments,
        ],
        names,
    )
    assert not [s for s in _strings(objects) if s.startswith("@")]
    node_names = {n["metadata"]["name"] for n in objects[1]}
    assert len(node_names) == len(case.nodes)
    assert {p["spec"]["nodeName"] for p in objects[2]} <= node_names
    for node in objects[1]:
        taints = node["spec"].get("taints", [])
        assert len({(t["key"], t["effect"]) for t in taints}) == len(taints)  # the apiserver refuses duplicates
    for pod in [*objects[2], objects[3]]:
        ports = [(p["hostPort"], p["protocol"]) for c in pod["spec"]["containers"] for p in c.get("ports", [])]
        assert len(set(ports)) == len(ports)
        for c in [*pod["spec"]["containers"], *pod["spec"].get("initContainers", [])]:
            res = c["resources"]
            assert res.get("limits", {}).get("nvidia.com/gpu") == res["requests"].get("nvidia.com/gpu")
    claims = {v["persistentVolumeClaim"]["claimName"] for v in objects[3]["spec"].get("volumes", [])}
    assert claims <= {c["metadata"]["name"] for c in objects[6]}
    csi_claims = {c["metadata"]["name"] for c in objects[6] if c["spec"]["storageClassName"].endswith("-csi")}
    assert claims - csi_claims == {c["metadata"]["name"] for c in objects[6]} - csi_claims  # every other claim
    assert {c["metadata"]["name"] for c in objects[7]} <= node_names  # a CSINode is named after its node
    assert {c["spec"]["volumeName"] for c in objects[6] if "volumeName" in c["spec"]} <= {
        pv["metadata"]["name"] for pv in objects[5]
    }
    json.dumps(objects)  # plain JSON, as sent


@settings(max_examples=50, deadline=None)
@given(cases(ADAPTER_FEATURES))
def test_the_supported_set_generates_nothing_else(case: Case) -> None:
    text = json.dumps([case.nodes, case.pods, case.pod])
    for absent in ("hostPort", "podAffinity", "podAntiAffinity", "topologySpreadConstraints", "nvidia.com/gpu"):
        assert absent not in text
    assert "ephemeral-storage" not in text and not case.pvcs


def test_feature_names_parse_with_a_clear_error() -> None:
    assert parse_features("all") == ALL_FEATURES
    assert parse_features("supported") == ADAPTER_FEATURES
    assert parse_features("gpu, taints") == {"gpu", "taints"}
    with pytest.raises(ValueError, match="unknown feature\\(s\\) gpus; known: "):
        parse_features("gpus,taints")
