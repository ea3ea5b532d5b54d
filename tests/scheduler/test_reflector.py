"""list + watch against the real apiserver: resourceVersion kept, 410 Gone -> relist.

The apiserver's watch cache answers a watch from an old resourceVersion with the current
state for a long while, so to get a genuine 410 on demand these tests use their own
apiserver with ``--watch-cache=false`` (watches served by etcd) and compact etcd, which is
what etcd's periodic compaction does to a long-disconnected client in production."""

from __future__ import annotations

import base64
import functools
import itertools
import json
import threading
import time
import urllib.request

import pytest

from drs_prom.scheduler.watch.cache import Reflector, WatchExpired
from tests.scheduler.conftest import list_pods, pod_body
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def etcd_watch_plane(k8s_bins):
    from drs_prom.testbed.controlplane import ControlPlane

    cp = ControlPlane(k8s_bins, extra_apiserver_args=["--watch-cache=false"])
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def core(etcd_watch_plane):
    from kubernetes import client

    return client.CoreV1Api(etcd_watch_plane.admin_client)


@pytest.fixture
def ns(etcd_watch_plane):
    etcd_watch_plane.create_namespace("reflector")
    return "reflector"


def compact_etcd(control_plane) -> int:
    """Compact etcd's history up to now (what etcd does periodically in production), so
    that resuming a watch from an older resourceVersion gets 410 Gone."""
    base = f"http://127.0.0.1:{control_plane.etcd.port}/v3/kv"
    head = _post(f"{base}/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"]
    _post(f"{base}/compaction", {"revision": head, "physical": True})
    return int(head)


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def test_too_old_resource_version_raises_watch_expired(etcd_watch_plane, core, ns):
    core.create_namespaced_pod(ns, pod_body("churn"), _preload_content=False)
    compact_etcd(etcd_watch_plane)
    r = Reflector(
        "pods",
        functools.partial(core.list_namespaced_pod, ns),
        lambda items: None,
        lambda k, o: None,
        watch_timeout_seconds=5,
    )
    r.resource_version = "1"  # compacted away
    with pytest.raises(WatchExpired):
        r._watch()


def test_relists_after_410_and_keeps_following_changes(etcd_watch_plane, core, ns):
    calls = {"list": 0, "watch": 0}
    expired_once = threading.Event()

    def list_fn(**kw):
        if kw.get("watch"):
            calls["watch"] += 1
            if not expired_once.is_set():  # the first watch resumes from an expired resourceVersion
                expired_once.set()
                kw["resource_version"] = "1"
        else:
            calls["list"] += 1
        return core.list_namespaced_pod(ns, **kw)

    seen: dict[str, str] = {}
    lists: list[int] = []
    core.create_namespaced_pod(ns, pod_body("before"), _preload_content=False)
    compact_etcd(etcd_watch_plane)
    existing = len(list_pods(core, ns))
    r = Reflector(
        "pods",
        list_fn,
        lambda items: lists.append(len(items)),
        lambda kind, obj: seen.__setitem__(obj["metadata"]["name"], kind),
        watch_timeout_seconds=30,
    )
    r.start()
    try:
        # the relist's callback has run (not just started: its list could otherwise include the pod made next)
        wait_for(lambda: r.relists >= 1 and len(lists) >= 2, 20, "a relist after 410")
        core.create_namespaced_pod(ns, pod_body("after"), _preload_content=False)
        wait_for(lambda: seen.get("after") == "ADDED", 20, "the watch to deliver the new pod")
        assert lists[:2] == [existing, existing]  # the relist saw the same pods as the first list
        assert int(r.resource_version) > 1
    finally:
        r.stop()


def test_reconnects_with_backoff_after_connection_failures(core, ns):
    """The first calls fail as a dead apiserver would (simulated: the harness cannot take its
    apiserver down and up on demand); the reflector backs off, doubling, then syncs."""
    failures = {"left": 3}
    attempts: list[float] = []

    def list_fn(**kw):
        attempts.append(time.monotonic())
        if failures["left"]:
            failures["left"] -= 1
            raise ConnectionRefusedError(111, "Connection refused")
        return core.list_namespaced_pod(ns, **kw)

    r = Reflector("pods", list_fn, lambda items: None, lambda k, o: None, backoff_initial=0.2, backoff_max=5)
    r.start()
    try:
        assert r.synced.wait(20)
        assert r.reconnects == 3
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        assert gaps[0] >= 0.2 * 0.8 and gaps[1] >= 0.4 * 0.8 and gaps[2] >= 0.8 * 0.8  # 0.2, 0.4, 0.8 s +-20% jitter
    finally:
        r.stop()
