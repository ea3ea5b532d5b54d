"""VolumeBinding for claims waiting for their first consumer: the plan per node, the progress the binding
cycle waits on, and the cache's hold on volumes an in-flight binding chose."""

from __future__ import annotations

import threading

from drs_prom.constraints import claim_binding, preemption
from drs_prom.constraints.claim_binding import DONE, R_BIND_CONFLICT, WAITING
from drs_prom.scheduler.watch.cache import ClusterCache
from drs_prom.types import ClaimInfo, NodeInfo, NodeSelectorRequirement, NodeSelectorTerm, PodRequest, VolumeInfo

GI = 2**30


def _node(name: str) -> NodeInfo:
    return NodeInfo(name=name, allocatable_cpu_m=4000, allocatable_mem_bytes=8 * GI, labels={"disk": name})


def _volume(name: str, on: str, size: int = 5, **kw: object) -> VolumeInfo:
    term = NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("disk", "In", (on,)),))
    fields: dict = {
        "storage_class": "local",
        "access_modes": ("ReadWriteOnce",),
        "capacity_bytes": size * GI,
        "phase": "Available",
        "node_affinity": (term,),
    }
    fields.update(kw)
    return VolumeInfo(name=name, **fields)


def _claim(name: str = "data", size: int = 2, **kw: object) -> ClaimInfo:
    fields: dict = {"storage_class": "local", "access_modes": ("ReadWriteOnce",), "request_bytes": size * GI}
    fields.update(kw)
    return ClaimInfo(namespace="ns", name=name, uid=f"uid-{name}", **fields)


def test_the_smallest_volume_that_fits_on_the_node_is_chosen_and_a_selector_narrows_them() -> None:
    vols = {v.name: v for v in (_volume("big", "n1", 50), _volume("snug", "n1", 3), _volume("tiny", "n1", 1))}
    pending = claim_binding.prepare([_claim()], vols)
    plan = claim_binding.plan(pending, _node("n1"), {}, {})
    assert isinstance(plan, claim_binding.Plan) and [v.name for _, v in plan.static] == ["snug"]
    assert claim_binding.plan(pending, _node("n2"), {}, {}) == R_BIND_CONFLICT
    assert not preemption.might_help(
        PodRequest(name="p", namespace="ns", cpu_m=1, mem_bytes=1), _node("n2"), [R_BIND_CONFLICT], "VolumeFilters"
    )
    from drs_prom.types import LabelSelector

    labelled = {**vols, "fast": _volume("fast", "n1", 50, labels=(("tier", "fast"),))}
    picky = claim_binding.prepare([_claim(selector=LabelSelector(match_labels=(("tier", "fast"),)))], labelled)
    plan = claim_binding.plan(picky, _node("n1"), {}, {})
    assert isinstance(plan, claim_binding.Plan) and [v.name for _, v in plan.static] == ["fast"]


def test_a_reserved_volume_is_nobody_elses_and_a_provisioner_takes_over() -> None:
    vols = {"only": _volume("only", "n1")}
    mine, other = _claim("mine"), _claim("other")
    held = {"only": ("ns", "mine")}
    assert claim_binding.prepare([mine], vols, held)[0].volumes == (vols["only"],)
    assert claim_binding.prepare([other], vols, held)[0].volumes == ()
    plan = claim_binding.plan(claim_binding.prepare([other], vols, held), _node("n1"), {"local": "csi.example"}, {})
    assert isinstance(plan, claim_binding.Plan) and plan.provision == (other,) and plan.static == ()


def test_progress_waits_for_the_controller_and_names_what_undid_the_binding() -> None:
    claim, volume = _claim(), _volume("pv", "n1")
    static = claim_binding.Plan(node="n1", static=((claim, volume),))
    pre_bound = _volume("pv", "n1", claim_ref=("ns", "data", "uid-data"))
    claims = {("ns", "data"): claim}
    assert claim_binding.progress(static, claims, {"pv": pre_bound}, _node("n1")) == WAITING
    bound = {("ns", "data"): _claim(volume_name="pv", bind_completed=True)}
    assert claim_binding.progress(static, bound, {"pv": pre_bound}, _node("n1")) == DONE
    assert claim_binding.progress(static, claims, {"pv": volume}, _node("n1")) == 'ClaimRef got reset for pv "pv"'
    asked = claim_binding.Plan(node="n1", provision=(claim,))
    moved = {("ns", "data"): _claim(selected_node="n2")}
    assert claim_binding.progress(asked, moved, {}, _node("n1")) == 'selectedNode annotation reset for PVC "data"'
    made = {("ns", "data"): _claim(selected_node="n1", volume_name="new", bind_completed=True)}
    assert claim_binding.progress(asked, made, {"new": _volume("new", "n1")}, _node("n1")) == DONE
    elsewhere = {"new": _volume("new", "n2")}
    assert "node affinity doesn't match" in claim_binding.progress(asked, made, elsewhere, _node("n1"))


def test_the_cache_holds_reserved_volumes_and_wakes_a_waiter_when_a_claim_changes() -> None:
    cache = ClusterCache("drs-scheduler")
    cache._volumes["only"] = _volume("only", "n1")
    cache.reserve_volumes({"only": ("ns", "mine")})
    assert cache.neighbours().storage.reserved == {"only": ("ns", "mine")}
    cache.release_volumes(["only"])
    assert cache.neighbours().storage.reserved == {}

    _, on_event = cache._store_handlers(cache._claims, lambda o: (("ns", "data"), o["claim"]))
    plan = claim_binding.Plan(node="n1", provision=(_claim(selected_node="n1"),))
    on_event("ADDED", {"claim": _claim(selected_node="n1")})
    done = _claim(selected_node="n1", volume_name="new", bind_completed=True)
    timer = threading.Timer(0.05, on_event, ("MODIFIED", {"claim": done}))
    timer.start()
    try:
        answer = cache.wait_storage(
            lambda s: claim_binding.progress(plan, s.claims, s.volumes, _node("n1")), 30, threading.Event()
        )
    finally:
        timer.cancel()
    assert answer == DONE
    assert cache.wait_storage(lambda s: WAITING, 0.01, threading.Event()) == WAITING
