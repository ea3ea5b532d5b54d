"""The chart's ``mode: kube-scheduler`` run on the harness: the upstream kube-scheduler binary the tests build,
started with the KubeSchedulerConfiguration the chart renders, as the ServiceAccount the chart's RBAC makes
(system:kube-scheduler, system:volume-scheduler and its own Lease, applied for real), and drs-prom's extender
served with the settings of the chart's ConfigMap (HTTPS with a self-signed certificate, as rendered). Only the
extender's address changes: loopback instead of the in-cluster Service.

The constraints probe passes through it (kube-scheduler's own filters), and the extender's prioritize verb is
what gave the scores: called, and its filter verb not (off unless the values ask for it)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from drs_prom.features import FEATURES
from drs_prom.signals.state import NodeSnapshot
from tests.helm.render import documents, helm_binary, render
from tests.scheduler.test_constraints_probe import run_probe
from tests.specs import SPEC
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

RBAC_KINDS = ("ServiceAccount", "ClusterRoleBinding", "RoleBinding", "Role")


class IdleSource:
    """Every node of the probe idle: the extender's scores come from a known state (Prometheus is tested apart)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def snapshot(self) -> NodeSnapshot:
        frame = pd.DataFrame(0.05, index=self.names, columns=list(FEATURES))
        return NodeSnapshot(features=frame, taken_at=time.time())


def _rendered(tmp_path: Path, namespace: str) -> dict:
    try:
        helm = helm_binary()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    return documents(render(helm, tmp_path, {"mode": "kube-scheduler"}, namespace))


def test_the_probe_passes_through_the_charts_second_kube_scheduler(
    control_plane, core, ns, fake_nodes, drs_sa_kubeconfig, tmp_path
):
    from drs_prom.config import load_settings
    from drs_prom.registry import make_policy
    from drs_prom.scheduler.runner import build_extender

    docs = _rendered(tmp_path, ns)  # released into the test's namespace: the Lease lives there
    rbac = [
        d
        for (kind, name), d in docs.items()
        if kind in RBAC_KINDS and name.startswith(("drs-kube-scheduler", "drs-volume-scheduler"))
    ]
    assert len(rbac) == 6  # ServiceAccount, 2 ClusterRoleBindings, auth-reader RoleBinding, Lease Role + binding
    rbac_yaml = yaml.safe_dump_all(rbac)
    settings_file = tmp_path / "drs-config.yaml"
    settings_file.write_text(docs[("ConfigMap", "drs-scheduler-config")]["data"]["config.yaml"])
    settings = load_settings(settings_file)
    assert settings.serving.tls == "self-signed"
    kube_cfg = yaml.safe_load(docs[("ConfigMap", "drs-kube-scheduler-config")]["data"]["config.yaml"])
    (stanza,) = kube_cfg["extenders"]

    control_plane.kubectl("apply", "-f", "-", input=rbac_yaml, check=True)
    names = [f"{ns}-{n}" for n in ("a1", "a2", "b1")]
    server, decider, cache = build_extender(
        settings, "127.0.0.1:0", str(drs_sa_kubeconfig), policy=make_policy("least-loaded", SPEC)
    )
    decider.source = IdleSource(names)  # before start(): the first refresh reads it
    sched = None
    try:
        assert cache is not None and cache.wait_synced(30)
        decider.start()
        server.start()
        assert stanza["urlPrefix"] == f"https://drs-extender.{ns}.svc:8888"
        stanza["urlPrefix"] = f"https://127.0.0.1:{server.port}"
        kc = control_plane.make_sa_kubeconfig(ns, "drs-kube-scheduler")  # who the Deployment's pods run as
        kube_cfg["clientConnection"] = {"kubeconfig": str(kc)}

        def start() -> None:
            nonlocal sched
            # the apiserver's RBAC authorizer reads the new bindings through an informer
            wait_for(lambda: control_plane.can_i("create", "pods", kc, ns, "binding"), 30, "RBAC")
            sched = control_plane.start_kube_scheduler(yaml.safe_dump(kube_cfg))

        run_probe(core, ns, fake_nodes, start)

        lease = control_plane.kubectl("get", "lease", "drs-kube-scheduler", "-n", ns, "-o", "yaml", check=True)
        assert yaml.safe_load(lease.stdout)["spec"]["holderIdentity"]  # its own Lease, renewed as its own account
        reg = decider.metrics.registry

        def calls(verb: str) -> float:
            return reg.get_sample_value("drs_extender_requests_total", {"verb": verb, "result": "ok"}) or 0.0

        assert calls("prioritize") >= 1  # kube-scheduler skips scoring when one node is left: not for every pod
        assert calls("filter") == 0
        assert not reg.get_sample_value("drs_extender_requests_total", {"verb": "prioritize", "result": "error"})
    finally:
        if sched is not None:
            sched.stop()
        server.stop()
        decider.stop()
        if cache is not None:
            cache.stop()
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=rbac_yaml)
