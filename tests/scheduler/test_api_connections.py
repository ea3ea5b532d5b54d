"""The binding cycle's kept connections against the real kube-apiserver, with urllib3 (what the kubernetes
client writes through) as the oracle for what each TLS setting accepts and refuses."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from drs_prom.scheduler.write import api_connections
from drs_prom.scheduler.write.bind import ApiWriter
from drs_prom.testbed.controlplane import ControlPlane
from drs_prom.testbed.pki import make_pki


def _setup(cp: ControlPlane, **over: Any) -> dict[str, Any]:
    return {**api_connections.connection_setup(cp.admin_client.configuration, 4), **over}


def _post_configmap(poster: api_connections.Poster, cp: ControlPlane, ns: str) -> int:
    name = f"cm-{uuid.uuid4().hex[:10]}"
    body = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
    status, _ = poster.post(f"/api/v1/namespaces/{ns}/configmaps", body, ApiWriter(cp.admin_client).headers(), 10)
    return status


def _counted_connects(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the connections opened (the real ones are opened)."""
    opened: list[int] = []
    real = api_connections.KeptConnections._open

    def _open(self: api_connections.KeptConnections, timeout: float) -> Any:
        opened.append(1)
        return real(self, timeout)

    monkeypatch.setattr(api_connections.KeptConnections, "_open", _open)
    return opened


def test_posts_one_after_another_share_one_kept_connection(control_plane, core, ns, monkeypatch):
    opened = _counted_connects(monkeypatch)
    conns = api_connections.KeptConnections(_setup(control_plane))
    try:
        assert [_post_configmap(conns, control_plane, ns) for _ in range(6)] == [201] * 6
    finally:
        conns.close()
    assert len(opened) == 1
    assert len(core.list_namespaced_config_map(ns, label_selector="").items) >= 6


def test_a_large_answer_and_an_error_answer_are_read_whole_and_the_connection_kept(control_plane, ns, monkeypatch):
    opened = _counted_connects(monkeypatch)
    conns = api_connections.KeptConnections(_setup(control_plane))
    headers = ApiWriter(control_plane.admin_client).headers()
    big = {f"k{i}": "v" * 1000 for i in range(300)}  # a 300 kB answer: many reads, chunked by the apiserver
    try:
        body = orjson.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": big})
        status, data = conns.post(f"/api/v1/namespaces/{ns}/configmaps", body, headers, 10)
        assert status == 201 and orjson.loads(data)["data"] == big
        status, data = conns.post("/api/v1/namespaces/no-such-namespace/configmaps", body, headers, 10)
        assert status == 404 and "no-such-namespace" in orjson.loads(data)["message"]
        assert _post_configmap(conns, control_plane, ns) == 201
    finally:
        conns.close()
    assert len(opened) == 1


def test_a_line_break_or_a_name_not_ascii_is_refused_before_a_connection_is_opened(control_plane, ns, monkeypatch):
    opened = _counted_connects(monkeypatch)
    conns = api_connections.KeptConnections(_setup(control_plane))
    headers = ApiWriter(control_plane.admin_client).headers()
    for path, extra in (
        (f"/api/v1/namespaces/{ns}/configmaps", {"X-Smuggled": "a\r\nX-Other: b"}),
        (f"/api/v1/namespaces/{ns}/configmaps HTTP/1.1\r\nX-Other: b", {}),
    ):
        with pytest.raises(ValueError, match="line break"):
            conns.post(path, b"{}", {**headers, **extra}, 10)
    with pytest.raises(UnicodeEncodeError):  # a ValueError too: the bind counts it failed, one line
        conns.post(f"/api/v1/namespaces/{ns}/configmaps/n\u00e4me", b"{}", headers, 10)
    assert opened == []


@pytest.mark.parametrize("keep", [6, 3])
def test_posts_from_many_threads_each_succeed_and_keep_at_most_the_pool_size(control_plane, ns, monkeypatch, keep):
    opened = _counted_connects(monkeypatch)
    conns = api_connections.KeptConnections(_setup(control_plane, threads=keep))
    statuses: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(5):
            s = _post_configmap(conns, control_plane, ns)
            with lock:
                statuses.append(s)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert statuses == [201] * 30
        assert len(conns._idle) <= keep
        if keep >= len(threads):  # every connection opened is kept: never more than requests in flight
            assert 1 <= len(opened) <= len(threads)
    finally:
        conns.close()


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Path:
    return make_pki(tmp_path_factory.mktemp("other-pki")).ca_file


@pytest.mark.parametrize(
    ("case", "accepted"),
    [
        ("the cluster's CA file", True),
        ("the cluster's CA as data", True),
        ("another CA", False),
        ("another CA, verify_ssl false", True),
        ("tls_server_name in the certificate", True),
        ("tls_server_name not in the certificate", False),
        ("tls_server_name not in the certificate, assert_hostname false", True),
    ],
)
def test_each_tls_setting_is_accepted_or_refused_as_urllib3_does(control_plane, ns, other_ca, case, accepted):
    cfg = control_plane.admin_client.configuration
    over: dict[str, Any] = {
        "the cluster's CA file": {},
        "the cluster's CA as data": {"ssl_ca_cert": None, "ca_cert_data": Path(cfg.ssl_ca_cert).read_text()},
        "another CA": {"ssl_ca_cert": str(other_ca)},
        "another CA, verify_ssl false": {"ssl_ca_cert": str(other_ca), "verify_ssl": False},
        "tls_server_name in the certificate": {"tls_server_name": "kubernetes.default"},
        "tls_server_name not in the certificate": {"tls_server_name": "not-the-apiserver.example"},
        "tls_server_name not in the certificate, assert_hostname false": {
            "tls_server_name": "not-the-apiserver.example",
            "assert_hostname": False,
        },
    }[case]
    setup = _setup(control_plane, **over)

    def outcome(poster: api_connections.Poster) -> str:
        try:
            return str(_post_configmap(poster, control_plane, ns))
        except Exception as exc:  # the refusal is the outcome compared
            return "refused" if "CERTIFICATE_VERIFY_FAILED" in str(exc) or "certificate" in str(exc) else repr(exc)

    kept = api_connections.KeptConnections(setup)
    pooled = api_connections.UrllibPool(api_connections.urllib3_pool(setup), setup["host"], owned=True)
    try:
        got = (outcome(kept), outcome(pooled))
    finally:
        kept.close()
        pooled.close()
    assert got == (("201", "201") if accepted else ("refused", "refused"))


def test_a_connection_the_apiserver_closed_while_idle_is_not_reused(k8s_bins, monkeypatch):
    opened = _counted_connects(monkeypatch)
    with ControlPlane(k8s_bins) as cp:
        cp.create_namespace("kept")
        conns = api_connections.KeptConnections(_setup(cp))
        try:
            assert _post_configmap(conns, cp, "kept") == 201
            cp.restart_apiserver()  # closes every connection it had, the kept one included
            assert _post_configmap(conns, cp, "kept") == 201  # not a broken pipe on the old socket
        finally:
            conns.close()
    assert len(opened) == 2


def test_settings_kept_connections_do_not_reproduce_write_through_urllib3():
    base = {"host": "https://127.0.0.1:6443", "verify_ssl": True, "threads": 2}
    assert isinstance(api_connections.poster(base), api_connections.KeptConnections)
    for over, why in (
        ({"proxy": "http://proxy.example:3128"}, "a proxy is configured"),
        ({"assert_hostname": "other.example"}, "assert_hostname names another host"),
    ):
        setup = {**base, **over}
        assert api_connections.unsupported(setup) == why
        assert isinstance(api_connections.poster(setup), api_connections.UrllibPool)
        with pytest.raises(ValueError, match=why):
            api_connections.KeptConnections(setup)
