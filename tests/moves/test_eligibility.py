"""Which pods may be moved: kube's own eviction rules."""

from __future__ import annotations

import pytest

from drs_prom.config import RebalanceSettings
from drs_prom.moves.eligibility import PodFacts, skip_reason


def pod(**kw) -> PodFacts:
    base = {
        "key": "ns/p",
        "namespace": "ns",
        "node": "n1",
        "owner_kind": "ReplicaSet",
        "owner": "ns/Deployment/web",
        "age_seconds": 3600.0,
    }
    return PodFacts(**(base | kw))


S = RebalanceSettings()


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (pod(), ""),
        (pod(owner_kind="StatefulSet"), ""),
        (pod(owner_kind=""), "no_controller"),
        (pod(owner_kind="DaemonSet"), "daemonset"),
        (pod(owner_kind="Node", mirror=True), "mirror"),
        (pod(owner_kind="SomeOperator"), "other_controller"),
        (pod(owner_kind="Job"), "job"),
        (pod(priority_class="system-cluster-critical"), "critical"),
        (pod(priority=2_000_001_000), "critical"),
        (pod(priority=1_000_000_001), "priority"),
        (pod(local_storage=True), "local_storage"),
        (pod(age_seconds=10.0), "young"),
        (pod(terminating=True), "terminating"),
        (pod(namespace="kube-system"), "namespace"),
    ],
)
def test_skip_reasons(facts, reason):
    assert skip_reason(facts, S) == reason


def test_settings_open_what_is_closed_by_default():
    s = RebalanceSettings(allow_local_storage=True, move_jobs=True, min_age_seconds=0, namespaces=["ns"])
    assert skip_reason(pod(local_storage=True), s) == ""
    assert skip_reason(pod(owner_kind="Job"), s) == ""
    assert skip_reason(pod(age_seconds=0.0), s) == ""
    assert skip_reason(pod(namespace="other"), s) == "namespace"
    # never, whatever the settings: system-critical priorities, DaemonSets, bare and mirror pods
    assert (
        skip_reason(pod(priority_class="system-node-critical"), RebalanceSettings(max_priority=2**31 - 1)) == "critical"
    )
    assert skip_reason(pod(owner_kind="DaemonSet"), s) == "daemonset"
    assert skip_reason(pod(owner_kind=""), s) == "no_controller"
