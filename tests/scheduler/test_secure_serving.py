"""The secure port like kube-scheduler's: HTTPS with a self-generated certificate (verified
by the client against that certificate), /metrics behind delegated authentication and
authorization through the harness apiserver (RBAC on): no token 401, a ServiceAccount
without the ClusterRole 403, one bound to ``get`` on the non-resource URL /metrics 200;
/healthz and /readyz open for probes; plain HTTP only when chosen explicitly."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
import uuid

import pytest
import yaml

from drs_prom.config import ServingSettings, load_settings
from drs_prom.errors import ConfigError
from drs_prom.scheduler.http.server import HealthServer
from drs_prom.scheduler.metrics import SchedulerMetrics


def _get(url: str, ctx: ssl.SSLContext | None, token: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _token(control_plane, namespace: str, sa: str) -> str:
    """A TokenRequest-API token (what make_sa_kubeconfig mints) for ``namespace/sa``."""
    cfg = yaml.safe_load(control_plane.make_sa_kubeconfig(namespace, sa).read_text())
    return cfg["users"][0]["user"]["token"]


@pytest.fixture
def metrics_rbac(control_plane):
    """Two ServiceAccounts; only ``reader`` is bound to a ClusterRole allowing get on /metrics."""
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(control_plane.admin_client)
    ns = f"auth-{uuid.uuid4().hex[:6]}"
    role = f"drs-test-metrics-{ns}"
    rbac.create_cluster_role(
        {"metadata": {"name": role}, "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        }
    )
    try:
        yield _token(control_plane, ns, "reader"), _token(control_plane, ns, "stranger")
    finally:
        rbac.delete_cluster_role_binding(role)
        rbac.delete_cluster_role(role)
        client.CoreV1Api(control_plane.admin_client).delete_namespace(ns)


@pytest.mark.integration
def test_metrics_need_an_allowed_token(control_plane, drs_sa_kubeconfig, metrics_rbac):
    reader, stranger = metrics_rbac
    serving = ServingSettings(tls="self-signed", authenticate_metrics=True, auth_cache_ttl_seconds=60)
    metrics = SchedulerMetrics()
    # the server asks the apiserver as the drs-scheduler ServiceAccount of deploy/k8s/10-rbac.yaml
    api = control_plane.api_client(drs_sa_kubeconfig)
    server = HealthServer("127.0.0.1:0", metrics.registry, lambda: True, lambda: True, serving, api).start()
    try:
        ctx = ssl.create_default_context(cafile=str(server.cert_file))  # verifies the self-signed cert
        base = f"https://127.0.0.1:{server.port}"
        assert _get(base + "/metrics", ctx)[0] == 401
        assert _get(base + "/metrics", ctx, "not-a-token")[0] == 401
        status, body = _get(base + "/metrics", ctx, stranger)
        assert status == 403 and "cannot get path" in body
        status, body = _get(base + "/metrics", ctx, reader)
        assert status == 200 and "drs_binds_total" in body
        reviews = server.httpd.auth.reviews
        assert _get(base + "/metrics", ctx, reader)[0] == 200
        assert server.httpd.auth.reviews == reviews  # the verdict came from the cache
        for probe in ("/healthz", "/readyz"):
            assert _get(base + probe, ctx) == (200, "ok")  # probes need no token
        with pytest.raises(urllib.error.URLError):  # an unverified client is refused by its own check
            urllib.request.urlopen(base + "/healthz", timeout=10)
        print(json.dumps({"no_token": 401, "refused_token": 403, "allowed_token": 200}))
    finally:
        server.stop()
        api.close()


def test_plain_http_only_when_chosen_and_auth_needs_tls():
    metrics = SchedulerMetrics()
    server = HealthServer(
        "127.0.0.1:0", metrics.registry, lambda: True, lambda: True, ServingSettings(tls="off")
    ).start()
    try:
        assert server.scheme == "http"
        assert _get(f"http://127.0.0.1:{server.port}/metrics", None)[0] == 200
    finally:
        server.stop()
    with pytest.raises(ConfigError, match="needs tls"):
        load_settings(None, {"serving.authenticate_metrics": "true"})
    with pytest.raises(ConfigError, match="cert_file"):
        load_settings(None, {"serving.tls": "files"})
    with pytest.raises(ConfigError, match="cannot use TLS certificate"):
        HealthServer(
            "127.0.0.1:0",
            metrics.registry,
            lambda: True,
            lambda: True,
            ServingSettings(tls="files", cert_file="/nonexistent.crt", key_file="/nonexistent.key"),
        )
