"""Fixtures for the live-scheduler tests: the shared control plane (tests/k8s), Prometheus
and exporters (tests/prom), the drs-system RBAC from deploy/k8s applied for real, and
per-test namespaces/nodes that are cleaned up after each test."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "k8s"


def pytest_configure(config):
    pm = config.pluginmanager
    for plugin in ("tests.k8s.fixtures", "tests.prom.fixtures"):
        if not pm.has_plugin(plugin):
            pm.import_plugin(plugin)


@pytest.fixture(scope="session")
def drs_sa_kubeconfig(control_plane) -> Path:
    """deploy/k8s namespace + RBAC applied for real; a kubeconfig for the drs-scheduler ServiceAccount."""
    for f in ("00-namespace.yaml", "10-rbac.yaml"):
        control_plane.kubectl("apply", "-f", str(DEPLOY / f), check=True)
    return control_plane.make_sa_kubeconfig("drs-system", "drs-scheduler")


@pytest.fixture(scope="session")
def high_priority(control_plane) -> str:
    """A PriorityClass (value 1000) for pods that must jump the queue."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    try:
        client.SchedulingV1Api(control_plane.admin_client).create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "drs-test-high"},
                "value": 1000,
            }
        )
    except ApiException as exc:
        if exc.status != 409:
            raise
    return "drs-test-high"


@pytest.fixture
def core(control_plane):
    from kubernetes import client

    return client.CoreV1Api(control_plane.admin_client)


@pytest.fixture
def ns(control_plane, core) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.create_namespace(name)
    try:
        yield name
    finally:
        with contextlib.suppress(Exception):  # best-effort cleanup of the test's pods; must not hide the test result
            core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def pod_body(name: str, cpu: str = "100m", mem: str = "64Mi", scheduler: str = "drs-scheduler", **spec: Any) -> dict:
    meta = spec.pop("metadata", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": mem}},
                }
            ],
            "terminationGracePeriodSeconds": 0,
            **spec,
        },
    }


def list_pods(core, namespace: str) -> list[dict]:
    return json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]


def journalled(sched: Any, n: int, keep: Callable[[Any], bool] = lambda r: True, timeout: float = 30) -> list:
    """The scheduler's journal rows that ``keep`` accepts, once there are ``n`` of them. A row is
    appended after the bind's reply reaches the bind worker (from the write process), so the
    apiserver can show a pod bound before its row exists."""
    from tests.waiting import wait_for

    return wait_for(
        lambda: len(rows := [r for r in sched.journal.since(0) if keep(r)]) >= n and rows,
        timeout,
        f"{n} journal rows",
    )


def events_for(core, namespace: str, pod: str) -> list[dict]:
    data = json.loads(
        core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={pod}", _preload_content=False).data
    )
    return data["items"]


def scheduled_message(core, namespace: str, pod: str, timeout: float = 30) -> str:
    """The message of ``pod``'s Scheduled event, waited for: the scheduler posts events from their own pool behind
    its write rate limiter, after the bind (and its journal row), so the event can trail both."""
    from tests.waiting import wait_for

    return wait_for(
        lambda: next((e["message"] for e in events_for(core, namespace, pod) if e["reason"] == "Scheduled"), None),
        timeout,
        f"Scheduled event of {pod}",
    )


@pytest.fixture
def make_scheduler(drs_sa_kubeconfig, ns, tmp_path, control_plane) -> Iterator[Callable[..., Any]]:
    """Start in-process Schedulers as the drs-scheduler ServiceAccount, watching only ``ns``."""
    from drs_prom.config import load_settings
    from drs_prom.scheduler.loop import Scheduler
    from drs_prom.stores.journal import Journal

    started: list[Any] = []
    lease = "drs-scheduler"  # the only Lease the RBAC lets the ServiceAccount renew

    def make(source=None, policy=None, identity=None, overrides: dict | None = None, **kw: Any) -> Any:
        settings = load_settings(
            None,
            {
                "scheduler.namespace": ns,
                "scheduler.lease_namespace": "drs-system",
                "scheduler.lease_name": lease,
                "scheduler.metrics_listen": "127.0.0.1:0",
                "scheduler.backoff_initial_seconds": 0.5,
                "scheduler.backoff_max_seconds": 4,
                "scheduler.state_refresh_seconds": 1,
                "scheduler.lease_duration_seconds": 4,
                "scheduler.renew_deadline_seconds": 3,
                "scheduler.retry_period_seconds": 0.5,
                **(overrides or {}),
            },
        )
        journal = kw.pop("journal", None) or Journal(tmp_path / f"journal-{len(started)}.sqlite")
        sched = Scheduler(
            settings,
            control_plane.api_client(drs_sa_kubeconfig),
            source=source,
            policy=policy,
            journal=journal,
            identity=identity,
            **kw,
        )
        started.append(sched)
        return sched.start()

    try:
        yield make
    finally:
        for s in started:
            s.stop()
            if s.journal is not None:
                s.journal.close()
