"""The live scheduler's usage estimate from stored cAdvisor series, on a real Prometheus.

Three and a half hours of a namespace's pods (two rollouts of Deployment ``web``, Deployment ``web-api`` whose name
extends it, a CronJob's runs, a Deployment with absurd series) are backfilled as the kubelet's cAdvisor series with
promtool, and the generated per-pod recording rules over them (tests/prom/cadvisor_backfill.py says how). The
scheduler's history then reads the rules' series exactly as on a live cluster.

The faults a real Prometheus gives on demand are made with one: an empty one (no cAdvisor series), one stopped with
SIGSTOP (every query times out) and one shut down (unreachable). No fake is used.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import threading
import time
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from drs_prom.config import PrometheusSettings, UsageSettings
from drs_prom.scheduler.decision.pod_demand import DemandResolver
from drs_prom.signals import promql
from drs_prom.signals.pod_usage import IMAGE, MAX_QUERY_CHARS, OWNER, PrometheusUsageHistory, pod_usage
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.usage.estimator import UsageModel, estimate, shipped_usage_model
from drs_prom.usage.history import PodUsage
from drs_prom.usage.owners import image_spellings, pod_name_regex
from tests.prom.cadvisor_backfill import StoredPod, backfilled_prometheus
from tests.prom.fixtures import Counted
from tests.prom.test_deploy import DEPLOY, promtool, run
from tests.waiting import wait_for

STEP = 15.0  # cAdvisor scrape interval of the backfill
HOUR = 3600.0
MI = 2**20
EXACT = UsageModel(prior_pods=0.0)  # the pods' weighted mean, nothing of the requests: the stored usage itself


def _pods(start: float) -> list[StoredPod]:
    s, half, end = start, start + 1.5 * HOUR, start + 3.5 * HOUR
    shop, api, report, odd = (
        "docker.io/library/shop:1.2",
        "docker.io/library/api:2.0",
        "registry.example/report:1",
        "docker.io/library/odd:1",
    )
    little = (0.2, 64 * MI, 1.0, 1.0, 1.0, 1.0)
    return [
        # Deployment web, first rollout (ReplicaSet web-5c8d7b9f4), then the current one (web-7d9f8c6b5)
        StoredPod("web-5c8d7b9f4-bq2xk", shop, s, half, (0.50, 200 * MI, 60e3, 20e3, 1.0e6, 3.0e6)),
        StoredPod("web-5c8d7b9f4-m7wzt", shop, s, half, (0.55, 220 * MI, 70e3, 25e3, 1.2e6, 3.2e6)),
        # with a sidecar, and also scraped from the kubelet's /metrics/resource (its copies must not count)
        StoredPod(
            "web-7d9f8c6b5-x2k4p",
            shop,
            half,
            end,
            (0.45, 240 * MI, 50e3, 30e3, 1.5e6, 3.5e6),
            sidecar=True,
            resource_endpoint=True,
        ),
        StoredPod(
            "web-7d9f8c6b5-d9vlf", shop, half, end, (0.50, 250 * MI, 65e3, 22e3, 2.0e6, 4.0e6), restart_at=s + 9000
        ),
        StoredPod("web-7d9f8c6b5-kq4nr", shop, s + 2 * HOUR, end, (0.6, 260 * MI, 55e3, 28e3, 1.8e6, 3.8e6)),
        # Deployment web-api: its name extends web's, its usage is nothing like it
        StoredPod("web-api-6b4f9d8c7-zt5wq", api, s, end, (3.0, 2048 * MI, 5e6, 4e6, 9e6, 9e6)),
        StoredPod("web-api-6b4f9d8c7-hk2lb", api, s, end, (3.2, 2100 * MI, 5e6, 4e6, 9e6, 9e6)),
        # CronJob report: two runs of 20 minutes (Jobs report-<scheduled minute>)
        StoredPod("report-28473120-p8vnc", report, s, s + 1200, (1.0, 512 * MI, 0.0, 0.0, 5e6, 1e6)),
        StoredPod("report-28473180-s6d2f", report, half, half + 1200, (1.2, 600 * MI, 0.0, 0.0, 6e6, 1e6)),
        # Deployment odd: one pod with NaN CPU, one with a negative working set, one sound
        StoredPod("odd-4d7c9b2f8-n4n2x", odd, s, end, little, nan_cpu=True),
        StoredPod("odd-4d7c9b2f8-ng7mx", odd, s, end, little, negative_mem=True),
        StoredPod("odd-4d7c9b2f8-k2w9p", odd, s, end, little),
    ]


def truth(pods: list[StoredPod]) -> PodUsage:
    """What the stored series say, exactly: each pod's usage, seen from its first sample to its last."""
    return PodUsage(
        np.array([p.usage for p in pods], dtype=np.float64),
        np.array([p.end - p.start for p in pods]),
        np.array([p.end for p in pods]),
    )


def of(pods: list[StoredPod], owner: str) -> list[StoredPod]:
    """The stored pods of ``owner`` (by the names its controller gives them)."""
    regex = pod_name_regex(owner)
    assert regex is not None
    return [p for p in pods if re.search(regex, p.name)]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A real Prometheus holding the backfilled cAdvisor series and the per-pod rules' series over them."""
    start = math.floor((time.time() - 4 * HOUR) / STEP) * STEP
    pods = _pods(start)
    t0 = time.perf_counter()
    prom, samples = backfilled_prometheus(tmp_path_factory.mktemp("pod-usage"), pods, STEP)
    print(f"\nbackfilled {samples} cAdvisor samples and the pod rules in {time.perf_counter() - t0:.1f}s")
    try:
        yield {"prom": prom, "pods": pods, "start": start}
    finally:
        prom.stop()


def history_of(url: str, registry: CollectorRegistry | None = None, timeout: float = 30.0, **usage: Any):
    """The scheduler's history over the Prometheus at ``url``, a failed read tried again after half a second."""
    source = PrometheusSource(PrometheusSettings(url=url, timeout_seconds=timeout))
    settings = UsageSettings(**usage)
    return PrometheusUsageHistory(source, settings, registry=registry or CollectorRegistry(), retry_seconds=0.5)


def pod_json(name, refs=None, labels=None, image="shop:1.2", cpu="1", mem="1Gi", namespace="shop"):
    meta = {"name": name, "namespace": namespace, "uid": "u-" + name, "labels": labels or {}}
    if refs is not None:
        meta["ownerReferences"] = refs
    container = {"name": "app", "image": image, "resources": {"requests": {"cpu": cpu, "memory": mem}}}
    return {"metadata": meta, "spec": {"schedulerName": "drs-scheduler", "containers": [container]}}


def rs(name, template_hash):
    return {
        "refs": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{name}-{template_hash}", "controller": True}
        ],
        "labels": {"pod-template-hash": template_hash},
    }


NEW_WEB = pod_json("web-7d9f8c6b5-new01", **rs("web", "7d9f8c6b5"))
CANARY = pod_json("shop-canary-8f7d6c5b4-new02", **rs("shop-canary", "8f7d6c5b4"))
REPORT = pod_json(
    "report-28473240-new03",
    [{"apiVersion": "batch/v1", "kind": "Job", "name": "report-28473240", "controller": True}],
    image="registry.example/report:1",
)
FRESH = pod_json("fresh-5b6c7d8f9-new04", **rs("fresh", "5b6c7d8f9"), image="fresh:1")


def close(got, want, rel=0.01):
    return all(math.isclose(a, b, rel_tol=rel, abs_tol=1e-6) for a, b in zip(got, want))


# -- against the backfilled history ------------------------------------------------------------


@pytest.mark.integration
def test_the_rules_count_each_pods_usage_once(stored):
    """At a moment the pod ran: its containers summed (not its cgroup again, not /metrics/resource's copies), its
    network once per interface (its cgroup and its sandbox both report eth0)."""
    prom, pod = stored["prom"], next(p for p in stored["pods"] if p.name == "web-7d9f8c6b5-x2k4p")
    at = pod.start + 1800
    names = promql.pod_recorded_names()
    for i, feature in enumerate(names):
        got = prom.query(f'{names[feature]}{{pod="{pod.name}"}}', at=at)
        assert len(got) == 1 and math.isclose(float(got[0]["value"][1]), pod.usage[i], rel_tol=1e-3), feature
    images = prom.query(f'{promql.POD_IMAGE_RULE}{{pod="{pod.name}"}}', at=at)
    assert {r["metric"]["image"] for r in images} == {pod.image, "docker.io/istio/proxyv2:1.20"}


@pytest.mark.integration
def test_an_owners_stored_pods_are_its_pods_with_their_means_durations_and_last_sightings(stored):
    registry = CollectorRegistry()
    h = history_of(stored["prom"].url, registry)
    got = h.read((OWNER, "shop", "Deployment/web", ""))
    want = of(stored["pods"], "Deployment/web")
    assert len(got) == len(want) == 5  # both rollouts, none of web-api's pods
    got_order, want_order = (
        np.argsort(got.last_seen * 10 + got.mean[:, 0]),
        np.argsort(truth(want).last_seen * 10 + truth(want).mean[:, 0]),
    )
    g, w = got.mean[got_order], truth(want).mean[want_order]
    np.testing.assert_allclose(g, w, rtol=5e-3)  # exact, but for the restarted pod: one interval reads 0 at its reset
    np.testing.assert_allclose(got.last_seen[got_order], truth(want).last_seen[want_order], atol=1.0)
    seconds = got.seconds[got_order] - truth(want).seconds[want_order]
    assert ((seconds <= 1.0) & (seconds > -2 * STEP - 1.0)).all(), seconds  # the first sample is one rule step late
    # the CronJob's runs, by the Jobs' names; a namespace with no cAdvisor series answers, with nothing
    assert len(h.read((OWNER, "shop", "CronJob/report", ""))) == 2
    assert len(h.read((OWNER, "elsewhere", "Deployment/web", ""))) == 0
    # the pods running an image, other owners' only
    similar = h.read((IMAGE, "shop", "Deployment/shop-canary", "shop:1.2"))
    assert len(similar) == 5
    assert len(h.read((IMAGE, "shop", "Deployment/web", "shop:1.2"))) == 0
    assert registry.get_sample_value("drs_usage_history_errors_total", {"reason": "bad_series"}) == 0


def counted_history(url: str, registry: CollectorRegistry, **kw: Any) -> tuple[PrometheusUsageHistory, Counted]:
    source = Counted(PrometheusSource(PrometheusSettings(url=url, timeout_seconds=30.0)))
    return PrometheusUsageHistory(source, UsageSettings(), registry=registry, **kw), source


def rows(usage: PodUsage) -> np.ndarray:
    """A PodUsage's rows in one order (its rows have none), for comparing two answers."""
    table = np.column_stack([usage.mean, usage.seconds, usage.last_seen])
    return table[np.lexsort(table.T[::-1])]


@pytest.mark.integration
def test_owners_and_images_read_in_one_query_answer_as_each_read_alone(stored):
    """Owners whose pods' names extend one another's (web, web-api), a bare pod, a CronJob, an owner with nothing
    stored and one whose pods cannot be named, in one query; then owners asking for one image, in another."""
    registry = CollectorRegistry()
    h, prom = counted_history(stored["prom"].url, registry)
    owners = ["Deployment/web", "Deployment/web-api", "CronJob/report", "Deployment/odd", "Pod/web-7d9f8c6b5-x2k4p"]
    owners += ["Deployment/fresh", "Rollout/web"]
    for kind, keys in (
        (OWNER, [(OWNER, "shop", o, "") for o in owners]),
        (IMAGE, [(IMAGE, "shop", o, "shop:1.2") for o in ["Deployment/shop-canary", *owners]]),
    ):
        before = prom.queries
        together = h.read_many(keys)
        assert prom.queries == before + 1, kind
        for key in keys:
            np.testing.assert_allclose(rows(together[key]), rows(h.read(key)), rtol=1e-12, err_msg=str(key))
    sizes = {k[2]: len(v) for k, v in h.read_many([(OWNER, "shop", o, "") for o in owners]).items()}
    assert sizes == dict(zip(owners, (5, 2, 2, 1, 1, 0, 0)))
    sizes = {k[2]: len(v) for k, v in h.read_many([(IMAGE, "shop", o, "shop:1.2") for o in owners]).items()}
    assert sizes == dict(zip(owners, (0, 5, 5, 5, 4, 5, 5)))  # web's pods, but to web itself
    # odd's two absurd pods counted by each of the three reads of its owner: together, alone, and for the sizes
    assert registry.get_sample_value("drs_usage_history_errors_total", {"reason": "bad_series"}) == 2 * 3


@pytest.mark.integration
def test_a_burst_of_new_owners_is_read_in_batches_each_key_answered_as_alone(stored):
    """Bare pods (each its own owner, as a batch system's): 32 a query; a stored pod among them gets its own row."""
    registry = CollectorRegistry()
    h, prom = counted_history(stored["prom"].url, registry)
    stored_pod, fresh = "Pod/web-7d9f8c6b5-x2k4p", [f"Pod/gen{i}" for i in range(40)]
    for owner in [stored_pod, *fresh]:
        assert h.owner("shop", owner, 0.0) is None and h.image("shop", "shop:1.2", owner, 0.0) is None
    assert h.owner("elsewhere", "Deployment/web", 0.0) is None
    assert h.queued() == 83
    assert h.refresh_queued() == 83
    assert prom.queries == 2 + 2 + 1  # 41 owners in shop (32 a query), as many asking for shop:1.2, one elsewhere
    assert max(prom.lengths) <= MAX_QUERY_CHARS

    def size(usage: PodUsage | None) -> int:  # an answer from the cache (None: no answer)
        assert usage is not None
        return len(usage)

    assert size(h.owner("shop", stored_pod, 0.0)) == 1 and size(h.owner("shop", fresh[0], 0.0)) == 0
    assert size(h.image("shop", "shop:1.2", fresh[-1], 0.0)) == 5  # web's pods ran shop:1.2
    assert size(h.image("shop", "shop:1.2", stored_pod, 0.0)) == 4  # all but itself
    assert size(h.owner("elsewhere", "Deployment/web", 0.0)) == 0 and prom.queries == 5


@pytest.mark.integration
def test_a_batch_stops_growing_before_its_query_is_too_long_for_a_url(stored):
    """A Deployment's name pattern is long: the batch takes as many as keep the query within MAX_QUERY_CHARS."""
    h, prom = counted_history(stored["prom"].url, CollectorRegistry())
    owners = ["Deployment/web", *(f"Deployment/checkout-service-v{i}" for i in range(20))]
    for owner in owners:
        h.owner("shop", owner, 0.0)
    assert h.refresh_queued() == 21
    assert max(prom.lengths) <= MAX_QUERY_CHARS and 2 < prom.queries < 21
    assert len(h.owner("shop", "Deployment/web", 0.0) or ()) == 5


@pytest.mark.integration
def test_the_refresher_lets_keys_queued_together_share_their_reads(stored):
    """Owners queued one after another while a read waits to be shared (here two seconds, 20 ms as shipped) are read
    together: a scheduler deciding a pod every few milliseconds queues them so. Fewer keys than a full batch, so
    that only the wait decides when the reads go."""
    h, prom = counted_history(stored["prom"].url, CollectorRegistry(), gather_seconds=2.0)
    h.start()
    try:
        fresh = [f"Pod/gen{i}" for i in range(9)]
        for owner in ["Deployment/web", *fresh]:
            h.owner("shop", owner, 0.0)
            h.image("shop", "shop:1.2", owner, 0.0)
        wait_for(lambda: h.queued() == 0 and h.owner("shop", fresh[-1], 0.0) is not None, 60, "the reads")
        wait_for(lambda: h.image("shop", "shop:1.2", fresh[-1], 0.0) is not None, 60, "the image's read")
    finally:
        h.stop()
    assert prom.queries == 2  # the ten owners in one query, the ten asking for shop:1.2 in another
    assert len(h.owner("shop", "Deployment/web", 0.0) or ()) == 5


@pytest.mark.integration
def test_a_pod_seen_pending_has_its_owner_and_image_asked_for_before_its_decision(stored):
    registry = CollectorRegistry()
    h = history_of(stored["prom"].url, registry)
    resolver = DemandResolver(UsageSettings(), h, registry=registry, model=EXACT)
    resolver.prefetch(NEW_WEB)  # what the scheduler does as the pods watch sees the pod pending
    assert h.queued() == 2  # its owner and its image, nothing estimated yet
    assert all(
        registry.get_sample_value("drs_usage_estimates_total", {"source": s}) == 0 for s in ("owner", "requests")
    )
    h.refresh_queued()
    got = resolver.resolve(NEW_WEB)  # its decision: the owner was read meanwhile
    assert got.source == "owner" and close(got.demand, truth(of(stored["pods"], "Deployment/web")).mean.mean(axis=0))


@pytest.mark.integration
def test_absurd_series_are_dropped_and_counted(stored):
    """NaN CPU samples and a negative working set make a pod's means absurd: it says nothing and is counted; a
    container restart (a counter back to 0) is what rate() is for: the restarted pod is read correctly above."""
    registry = CollectorRegistry()
    h = history_of(stored["prom"].url, registry)
    got = h.read((OWNER, "shop", "Deployment/odd", ""))
    assert len(got) == 1 and math.isclose(got.mean[0, 0], 0.2, rel_tol=1e-3)
    assert registry.get_sample_value("drs_usage_history_errors_total", {"reason": "bad_series"}) == 2


@pytest.mark.integration
def test_new_pods_are_estimated_from_their_owner_or_similar_workloads_without_waiting(stored):
    pods, registry = stored["pods"], CollectorRegistry()
    h = history_of(stored["prom"].url, registry)
    resolver = DemandResolver(UsageSettings(), h, registry=registry)  # the shipped usage model
    exact = DemandResolver(UsageSettings(), h, registry=CollectorRegistry(), model=EXACT)
    # nothing is cached before the refresher runs: the requests answer at once, and the owner is queued
    t0 = time.perf_counter()
    assert resolver.resolve(NEW_WEB).source == "requests"
    assert time.perf_counter() - t0 < 0.5 and h.queued() == 2  # the owner, and its image
    h.start()
    try:
        got = wait_for(lambda: (d := resolver.resolve(NEW_WEB)).source == "owner" and d, 60, "web's stored usage")
        now = time.time()
        web = truth(of(pods, "Deployment/web"))
        want = estimate(1000, 2**30, web, PodUsage.empty(), shipped_usage_model(), now)
        assert close(got.demand, want.demand), (got.demand, want.demand)
        mean = web.mean.mean(axis=0)  # every pod seen for long: one vote each
        assert close(exact.resolve(NEW_WEB).demand, mean), "all six signals near the stored usage"
        # a new Deployment running the same image: web's pods are its similar workloads
        got = wait_for(lambda: (d := exact.resolve(CANARY)).source == "similar" and d, 60, "the image's pods")
        assert close(got.demand, mean)
        # a CronJob's next run, from its Job's name
        got = wait_for(lambda: (d := exact.resolve(REPORT)).source == "owner" and d, 60, "the CronJob's runs")
        assert close(got.demand, truth(of(pods, "CronJob/report")).mean.mean(axis=0))
        # an owner nothing is stored of, running an image nothing runs: its requests
        wait_for(lambda: (h.owner("shop", "Deployment/fresh", now) is not None) and h.queued() == 0, 60, "a read")
        assert resolver.resolve(FRESH).source == "requests"
    finally:
        h.stop()
    assert not any(t.name == "drs-usage-history" for t in threading.enumerate())
    counted = {s: registry.get_sample_value("drs_usage_estimates_total", {"source": s}) for s in ("owner", "requests")}
    assert counted["owner"] >= 1 and counted["requests"] >= 2
    assert registry.get_sample_value("drs_usage_history_errors_total", {"reason": "timeout"}) == 0


@pytest.mark.integration
def test_owners_that_cannot_be_named_fall_back_and_are_counted(stored):
    registry = CollectorRegistry()
    h = history_of(stored["prom"].url, registry)
    resolver = DemandResolver(UsageSettings(), h, registry=registry, model=EXACT)
    odd = pod_json("web-7d9f8c6b5-odd01", refs="ReplicaSet/web-7d9f8c6b5")  # references that cannot be read
    rollout = pod_json(
        "web-7d9f8c6b5-rol01",
        [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "web", "controller": True}],
    )  # an operator's kind: its pods' names are not known, its image's pods are
    h.start()
    try:
        assert resolver.resolve(odd).source == "requests"
        assert resolver.resolve(rollout).source == "requests"
        wait_for(lambda: h.queued() == 0 and resolver.resolve(rollout).source == "similar", 60, "the image's pods")
        assert resolver.resolve(odd).source == "similar"  # Pod/<name> has no pods stored; its image has
    finally:
        h.stop()
    assert registry.get_sample_value("drs_usage_history_errors_total", {"reason": "owner_unknown"}) == 1


# -- faults -----------------------------------------------------------------------------------


@pytest.mark.integration
def test_no_cadvisor_series_a_prometheus_that_times_out_or_is_down_never_holds_a_decision(prometheus_factory):
    prom = prometheus_factory()  # no scrape targets: no cAdvisor series at all
    registry = CollectorRegistry()
    h = history_of(prom.url, registry, timeout=1.0)
    resolver = DemandResolver(UsageSettings(), h, registry=registry, model=EXACT)
    h.start()
    try:
        assert resolver.resolve(NEW_WEB).source == "requests"
        (got,) = wait_for(lambda: (u := h.owner("shop", "Deployment/web", 0.0)) is not None and (u,), 30, "an answer")
        assert len(got) == 0 and resolver.resolve(NEW_WEB).source == "requests"

        def errors(reason: str) -> float:
            return registry.get_sample_value("drs_usage_history_errors_total", {"reason": reason}) or 0.0

        os.kill(prom.pid, signal.SIGSTOP)  # accepts connections, answers nothing: every query times out
        try:
            slowest = 0.0
            for i in range(20):  # new owners while the refresher waits on Prometheus
                t0 = time.perf_counter()
                assert resolver.resolve(pod_json(f"job{i}-x2k4p", **rs(f"job{i}", "5c8d7"))).source == "requests"
                slowest = max(slowest, time.perf_counter() - t0)
            assert slowest < 0.2, slowest
            wait_for(lambda: errors("timeout") >= 2, 30, "timeouts counted")
        finally:
            os.kill(prom.pid, signal.SIGCONT)
        prom.stop()
        t0 = time.perf_counter()
        assert resolver.resolve(pod_json("late-x2k4p", **rs("late", "5c8d7"))).source == "requests"
        assert time.perf_counter() - t0 < 0.2
        wait_for(lambda: errors("unreachable") >= 1, 60, "an unreachable Prometheus counted")
    finally:
        h.stop()
    assert not any(t.name == "drs-usage-history" for t in threading.enumerate())


@pytest.mark.integration
def test_the_queue_and_the_cache_are_bounded(stored):
    registry = CollectorRegistry()
    h = history_of(stored["prom"].url, registry, queue_size=1, cache_size=2, refresh_seconds=3600, ttl_seconds=3600)
    assert h.owner("shop", "Deployment/web", 0.0) is None and h.owner("shop", "CronJob/report", 0.0) is None
    assert (
        h.queued() == 1 and registry.get_sample_value("drs_usage_history_errors_total", {"reason": "queue_full"}) == 1
    )
    assert h.refresh_queued() == 1
    assert len(h.owner("shop", "Deployment/web", 0.0) or []) == 5  # answered from the cache, no query
    h.owner("shop", "Deployment/odd", 0.0)
    h.owner("shop", "Deployment/web-api", 0.0)  # a third key: the least recently asked one goes
    assert h.queued() == 1 and h.owner("shop", "Deployment/web", 0.0) is None


# -- the query text and its answers, without a server ------------------------------------------


def test_history_queries_read_the_rules_once_per_statistic():
    regex = pod_name_regex("Deployment/web.v2")
    q = promql.pod_history("shop", "6h", "2m", pods=regex or "")
    assert q.count('namespace="shop",pod=~"^web\\\\.v2-') == 8  # six means, first and last seen
    assert "drs:pod_cpu:cores_irate2m" in q and "min_over_time(drs:pod_last_seen" in q and " and on(" not in q
    assert q.count(f'"{promql.HISTORY_STAT}"') == 8
    img = promql.image_regex(image_spellings("shop:1.2"))
    q = promql.pod_history("shop", "6h", "2m", exclude=regex or "", image=img)
    assert 'pod!~"^web\\\\.v2-' in q and "pod=~" not in q
    assert q.endswith(
        'and on(namespace, pod) group by(namespace, pod) (max_over_time(drs:pod_image:info{namespace="shop",'
        'image=~"^(?:shop:1\\\\.2|docker\\\\.io/library/shop:1\\\\.2)$"}[6h]))'
    )


def test_rules_follow_the_usage_settings():
    from drs_prom.config import Settings

    s = Settings.model_validate({"usage": {"rate_window": "5m", "cadvisor_selector": 'job="kubelet"'}})
    groups = promql.rule_groups(promql.RuleParams.for_settings(s))["groups"]
    (pod_group,) = [g for g in groups if g["name"] == promql.POD_USAGE_GROUP]
    records = {r["record"]: r["expr"] for r in pod_group["rules"]}
    assert "drs:pod_cpu:cores_irate5m" in records and pod_group["interval"] == "30s"
    assert all('job="kubelet"' in e for e in records.values())
    assert len(records) == 8 and promql.POD_LAST_SEEN_RULE in records and promql.POD_IMAGE_RULE in records


def test_answers_become_rows_absurd_pods_are_counted_and_missing_signals_read_zero():
    def stats(pod: str, **values: float) -> list[tuple[dict[str, str], float]]:
        return [({"namespace": "ns", "pod": pod, promql.HISTORY_STAT: k}, v) for k, v in values.items()]

    answer = [
        *stats("a", cpu=0.5, mem=1e8, net_rx=1.0, first=100.0, last=700.0),  # no tx, no disk series
        *stats("nan", cpu=math.nan, mem=1e8, first=100.0, last=700.0),
        *stats("neg", cpu=0.5, mem=-1.0, first=100.0, last=700.0),
        *stats("unseen", cpu=0.5, mem=1e8),  # no seen rule: no duration
        *stats("new", cpu=0.5, mem=1e8, first=700.0, last=700.0),  # one sample: too new, not absurd
        ({"namespace": "ns", promql.HISTORY_STAT: "cpu"}, 1.0),  # no pod label: not a pod
    ]
    usage, absurd = pod_usage(answer)
    assert absurd == 3 and len(usage) == 1
    assert usage.mean[0].tolist() == [0.5, 1e8, 1.0, 0.0, 0.0, 0.0]
    assert usage.seconds.tolist() == [600.0] and usage.last_seen.tolist() == [700.0]
    empty, none = pod_usage([])
    assert len(empty) == 0 and none == 0


def test_promtool_pod_usage_rule_tests_pass_and_can_fail(tmp_path):
    out = run(promtool(), "test", "rules", "tests/drs.pod-usage.test.yml")
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr
    # rules that do not leave out the kubelet's /metrics/resource copies count the pod's CPU twice
    (tmp_path / "rules").mkdir()
    (tmp_path / "tests").mkdir()
    careless = promql.rules_yaml(promql.RuleParams(cadvisor_selector=""))
    (tmp_path / "rules" / "drs.rules.yml").write_text(careless)
    shutil.copy(DEPLOY / "tests" / "drs.pod-usage.test.yml", tmp_path / "tests" / "t.yml")
    out = run(promtool(), "test", "rules", "tests/t.yml", cwd=tmp_path)
    assert out.returncode != 0 and "drs:pod_cpu:cores_irate2m" in out.stdout + out.stderr
    assert "drs:pod_net_rx" not in out.stdout + out.stderr  # network is read from the cgroup and sandbox only


def test_promql_rules_command_writes_the_pod_rules_for_a_settings_file(tmp_path):
    from click.testing import CliRunner

    from drs_prom.cli import cli

    config = tmp_path / "config.yaml"
    config.write_text("usage:\n  cadvisor_selector: 'job=\"kubelet\"'\n  rate_window: 1m\n")
    mine = CliRunner().invoke(cli, ["promql", "rules", "--config", str(config)])
    assert mine.exit_code == 0, mine.output
    assert 'irate(container_cpu_usage_seconds_total{job="kubelet",container!=""' in mine.output
    assert "drs:pod_cpu:cores_irate1m" in mine.output
    shipped = CliRunner().invoke(cli, ["promql", "rules"])
    assert shipped.output == (DEPLOY / "rules" / "drs.rules.yml").read_text()


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        ({"cadvisor_selector": '{job="kubelet"}'}, "usage.cadvisor_selector"),
        ({"cadvisor_selector": "job=kubelet"}, "usage.cadvisor_selector"),
        ({"history_seconds": 10}, "usage.history_seconds"),
        ({"rate_window": "0m"}, "usage.rate_window"),
        ({"refresh_seconds": 600, "ttl_seconds": 300}, "ttl_seconds must be at least refresh_seconds"),
        ({"model_path": "/nonexistent/usage.json"}, "usage.model_path"),
        ({"cache_size": 0}, "usage.cache_size"),
    ],
)
def test_bad_usage_settings_stop_at_load_naming_the_field(usage, message):
    from drs_prom.config import load_settings
    from drs_prom.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(None, {f"usage.{k}": v for k, v in usage.items()})
    good = 'job="kubelet", metrics_path!~"/metrics/(resource|probes)",'
    assert load_settings(None, {"usage.cadvisor_selector": good}).usage.cadvisor_selector == good


# -- the usage model refitted on these stored series (drs_prom.ops.usage_refit) -----------------------------------

OWNERS = {"web": "Deployment/web", "web-api": "Deployment/web-api", "report": "CronJob/report", "odd": "Deployment/odd"}


def _journalled(pods: list[StoredPod], journal_path) -> Any:
    """The decision journal of the pods drs-prom placed: their names, top owners and requests."""
    from drs_prom.stores.journal import Decision, Journal

    journal = Journal(journal_path)
    for p in pods:
        owner = next(o for prefix, o in sorted(OWNERS.items(), key=lambda kv: -len(kv[0])) if p.name.startswith(prefix))
        journal.append(
            Decision(
                pod_uid="u-" + p.name,
                pod_name=p.name,
                namespace="shop",
                pod_features=[0.0] * 6,
                candidates=["node-1"],
                feasible=[True],
                chosen="node-1",
                scores=[0.0],
                policy="drs",
                ts=p.start,
                owner=owner,
                pod_cpu_m=1000,
                pod_mem_bytes=512 * MI,
            )
        )
    return journal


@pytest.mark.integration
def test_the_usage_model_is_refitted_on_the_stored_pods_judged_on_the_newest_and_served_when_better(stored, tmp_path):
    from drs_prom.config import load_settings
    from drs_prom.ops.usage_refit import journalled, pod_table, refit_usage, usage_model_source
    from drs_prom.stores.model_store import ModelStore

    pods, start, prom = stored["pods"], stored["start"], stored["prom"]
    now = start + 4 * HOUR
    journal = _journalled(pods, tmp_path / "journal.db")
    settings = load_settings(
        None,
        {
            "prometheus.url": prom.url,
            "retrain.model_store": str(tmp_path / "store"),
            "usage.history_seconds": 5 * HOUR,
            "usage.refit_holdout_seconds": 2.5 * HOUR,  # judged on the pods that started at 1.5 h and later
        },
    )
    source = PrometheusSource(settings.prometheus)
    try:
        table, missing = pod_table(journalled(journal.since(0.0)), source, settings.usage, now, 5 * HOUR)
        assert missing == 0 and len(table) == len(pods)
        rows = [i for i, o in enumerate(table.owner) if o == "Deployment/web-api"]
        assert {table.image[i] for i in rows} == {"docker.io/library/api:2.0"}
        api = [p.usage for p in pods if p.name.startswith("web-api-")]
        assert sorted(table.mean[rows, 0]) == pytest.approx(sorted(u[0] for u in api), rel=0.05)
        assert sorted(table.mean[rows, 2]) == pytest.approx(sorted(u[2] for u in api), rel=0.05)
        assert table.start.min() == pytest.approx(start, abs=2 * STEP)

        result = refit_usage(settings, source, journal, now=now)
        # judged on the 4 pods started within the holdout; fitted on the older ones but the two broken odd pods
        assert result.refit is not None and result.refit.judged_pods == 4 and result.refit.fitted_pods == len(pods) - 6
        store = ModelStore(tmp_path / "store" / "usage")
        assert result.outcome == ("promoted" if result.refit.promote else "kept")
        if result.outcome == "promoted":
            assert store.current() == result.version
            assert usage_model_source(settings, check_seconds=0.0)() == result.refit.candidate
        else:
            assert store.current() is None and store.get(result.version).status == "rejected"
            assert usage_model_source(settings, check_seconds=0.0)() == shipped_usage_model()
        # the refit learnt this cluster's requests-to-use ratio and traffic, which the shipped model cannot know
        assert result.refit.candidate.io_per_pod != (0.0, 0.0, 0.0, 0.0)

        empty = _journalled([], tmp_path / "empty.db")
        assert refit_usage(settings, source, empty, now=now).outcome == "no_history"
        empty.close()
    finally:
        source.close()
        journal.close()
    down = load_settings(None, {"prometheus.url": "http://127.0.0.1:9", "retrain.model_store": str(tmp_path / "s2")})
    unreachable = PrometheusSource(down.prometheus)
    journal = _journalled(pods[:2], tmp_path / "j2.db")
    try:
        assert refit_usage(down, unreachable, journal, now=now).outcome == "error"
    finally:
        unreachable.close()
        journal.close()
