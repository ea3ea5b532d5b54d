"""When a Deployment may be surged, when its replacement counts as up, and the state its annotation keeps."""

from __future__ import annotations

from typing import Any

from drs_prom.moves.eligibility import PodFacts
from drs_prom.rebalance.surge import (
    AUTOSCALED,
    PAUSED,
    ROLLING_OUT,
    SURGE_LABEL,
    InFlight,
    blocker,
    in_flight,
    landed_back,
    ready,
)


def deployment(replicas: int = 2, generation: int = 3, **status: Any) -> dict[str, Any]:
    steady = {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas}
    steady["readyReplicas"] = replicas
    return {
        "metadata": {"name": "web", "namespace": "shop", "generation": generation},
        "spec": {"replicas": replicas},
        "status": steady | status,
    }


def test_a_steady_deployment_may_be_surged_and_one_rolling_out_paused_or_autoscaled_may_not():
    assert blocker(deployment(), []) == ""
    assert blocker(deployment(), ["other"]) == ""
    assert blocker(deployment(), ["web"]) == AUTOSCALED
    paused = deployment()
    paused["spec"]["paused"] = True
    assert blocker(paused, []) == PAUSED
    assert blocker(deployment(observedGeneration=2), []) == ROLLING_OUT  # a new spec not yet seen
    assert blocker(deployment(updatedReplicas=1), []) == ROLLING_OUT  # an old ReplicaSet still has a pod
    assert blocker(deployment(readyReplicas=1), []) == ROLLING_OUT  # a replica is not ready: no margin to lean on
    going = deployment()
    going["status"]["replicas"] = 3
    assert blocker(going, []) == ROLLING_OUT  # a pod is still going
    surging = deployment()
    surging["metadata"]["labels"] = {SURGE_LABEL: "true"}
    assert blocker(surging, []) == ROLLING_OUT  # one surge at a time


def test_the_replacement_is_up_when_every_replica_asked_for_is_ready_at_the_current_generation():
    flight = InFlight("shop", "web", "web-1", "u1", 2, 100.0, "n1", None)
    d = deployment(replicas=3, generation=4, readyReplicas=2)
    assert not ready(d, flight)
    assert ready(deployment(replicas=3, generation=4), flight)
    assert not ready(deployment(replicas=3, generation=4, observedGeneration=3), flight)


def test_the_annotation_keeps_the_surge_and_a_broken_one_is_no_surge():
    flight = InFlight("shop", "web", "web-1", "u1", 2, 100.5, "n1", "7")
    d = deployment(replicas=3)
    d["metadata"]["annotations"] = {SURGE_LABEL: flight.annotation()}
    assert in_flight(d) == flight
    assert in_flight(deployment()) is None
    d["metadata"]["annotations"] = {SURGE_LABEL: "{not json"}
    assert in_flight(d) is None
    d["metadata"]["annotations"] = {SURGE_LABEL: '{"pod": "web-1"}'}
    assert in_flight(d) is None


def test_a_replica_started_since_the_surge_on_the_pods_own_node_has_landed_back():
    flight = InFlight("shop", "web", "web-1", "u1", 2, 1000.0, "n1", None)

    def pod(key: str, node: str, age: float, owner: str = "shop/Deployment/web") -> PodFacts:
        return PodFacts(key=key, namespace="shop", node=node, owner_kind="ReplicaSet", owner=owner, age_seconds=age)

    now = 1060.0
    moving = pod("shop/web-1", "n1", 3600)
    assert not landed_back(flight, [moving, pod("shop/web-0", "n1", 3600)], now)  # older pods of it, not a replica
    assert not landed_back(flight, [moving, pod("shop/web-2", "n2", 30)], now)  # the replica elsewhere
    assert not landed_back(flight, [moving, pod("shop/api-2", "n1", 30, "shop/Deployment/api")], now)  # another owner
    assert landed_back(flight, [moving, pod("shop/web-2", "n1", 30)], now)
    assert landed_back(flight, [moving, pod("shop/web-2", "n1", 60.5)], now)  # start times are whole seconds
