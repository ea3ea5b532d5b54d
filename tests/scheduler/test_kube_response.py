"""Raw responses read to their end keep one connection to the real apiserver for many writes."""

from __future__ import annotations

import pytest

from drs_prom.scheduler.write.kube_response import drained
from tests.scheduler.conftest import pod_body

pytestmark = pytest.mark.integration


def _connections_opened(api_client) -> int:
    pools = api_client.rest_client.pool_manager.pools  # urllib3's container: keys(), not iteration
    return sum(pools[key].num_connections for key in list(pools.keys()))


def test_writes_whose_body_is_not_needed_reuse_one_connection(control_plane, ns) -> None:
    """Status writes and patches (the twin kubelet's 2-4 per pod, the scheduler's events and lease renewals)
    must not each open a TLS connection: an unread raw response closes its connection."""
    from kubernetes import client

    api = client.ApiClient(control_plane.admin_client.configuration)  # its own pool, counted from zero
    try:
        core = client.CoreV1Api(api)
        name = "reuse"
        drained(core.create_namespaced_pod(ns, pod_body(name), _preload_content=False))
        for i in range(20):
            body = {"metadata": {"annotations": {"drs.io/write": str(i)}}}
            drained(core.patch_namespaced_pod(name, ns, body, _preload_content=False))
        assert _connections_opened(api) == 1
        pod = core.read_namespaced_pod(name, ns)
        assert pod.metadata.annotations["drs.io/write"] == "19"
    finally:
        api.close()
