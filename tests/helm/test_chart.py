"""The Helm chart deploy/helm/drs-prom with a real helm (built from the Go module proxy) against the
real kube-apiserver of the test harness: lint, template (defaults and every switch on) applied with
server-side dry-run, values.schema.json rejecting bad values, and a real ``helm install`` whose
ServiceAccount ends up with exactly the scheduler's permissions. deploy/k8s must say the same as
the chart (RBAC, security contexts), and the chart's rules/dashboard the same as promql.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from drs_prom.config import FILL_WINDOW, load_settings
from drs_prom.signals import promql
from tests.helm.render import CHART, REPO, documents, helm, helm_binary, render, values_file
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

K8S = REPO / "deploy" / "k8s"
NS = "drs-helm"

ALL_ON = {
    "mode": "scheduler",
    "exporter": {"enabled": True},
    "retrain": {"cronjob": {"enabled": True}},
    "persistence": {"enabled": True, "storageClassName": "standard"},
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "grafanaDashboard": {"enabled": True, "folder": "drs-prom"},
    "model": {"path": "/opt/drs/custom-model/mine.keras", "volume": {"configMap": {"name": "my-model"}}},
    "image": {
        "scheduler": {"repository": "registry.example/drs-prom-scheduler", "tag": "dev"},
        "exporter": {"repository": "registry.example/drs-prom-exporter", "tag": "dev"},
        "retrain": {"repository": "registry.example/drs-prom-retrain", "tag": "dev"},
        "pullPolicy": "Always",
    },
    "promStoreSecret": "drs-prom-store",
    "settings": {
        "prometheus": {"url": "https://mimir.example/", "path_prefix": "/prometheus", "node_selector": 'job="node"'},
        "normalisation": {"cpu_full": 0.8},
        "scheduler": {"scheduler_name": "drs-scheduler", "lease_name": "drs-scheduler"},
        "retrain": {"epochs": 5},
        "reward": {"slowdown_weight": 0.4},
    },
}

# Minimal CustomResourceDefinitions for the two prometheus-operator kinds the chart can render: the
# harness runs no operator, and server-side dry-run needs the kinds to exist. The real CRDs validate
# more; these only make the API server accept (and dry-run) the objects by group/version/kind.
CRDS = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: prometheusrules.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: PrometheusRule, plural: prometheusrules, singular: prometheusrule, listKind: PrometheusRuleList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"""


@pytest.fixture(scope="session")
def helm_bin() -> str:
    try:
        return helm_binary()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


def _helm(
    helm_bin: str, *args: str, kubeconfig: Path | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return helm(helm_bin, *args, kubeconfig=kubeconfig, tmp=tmp)


def _values(tmp_path: Path, values: dict) -> Path:
    return values_file(tmp_path, values)


def _render(helm_bin: str, tmp_path: Path, values: dict | None = None) -> str:
    return render(helm_bin, tmp_path, values, NS)


def _docs(rendered: str) -> dict[tuple[str, str], dict]:
    return documents(rendered)


@pytest.mark.parametrize("values", [None, ALL_ON], ids=["defaults", "all-switches-on"])
def test_helm_lint(helm_bin: str, tmp_path: Path, values: dict | None) -> None:
    args = ["lint", str(CHART), "--strict"] + (["-f", str(_values(tmp_path, values))] if values else [])
    out = _helm(helm_bin, *args, tmp=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout


@pytest.fixture(scope="module")
def helm_ns(control_plane):
    control_plane.kubectl("create", "namespace", NS)
    control_plane.kubectl("apply", "-f", "-", input=CRDS, check=True)
    control_plane.kubectl("wait", "--for=condition=Established", "crd/servicemonitors.monitoring.coreos.com",
                          "crd/prometheusrules.monitoring.coreos.com", "--timeout=60s", check=True)  # fmt: skip
    return control_plane


@pytest.mark.parametrize(
    "values",
    [
        None,
        ALL_ON,
        {**ALL_ON, "mode": "extender"},
        {**ALL_ON, "mode": "kube-scheduler"},
        {"exporter": {"enabled": False}, "scheduler": {"leaderElection": False}},
    ],
    ids=["defaults", "all-switches-on", "extender", "kube-scheduler", "cluster-node-exporter"],
)
def test_rendered_chart_passes_server_side_dry_run(helm_bin: str, helm_ns, tmp_path: Path, values: dict | None) -> None:
    rendered = _render(helm_bin, tmp_path, values)
    proc = helm_ns.kubectl("apply", "--dry-run=server", "-f", "-", input=rendered)
    assert proc.returncode == 0, proc.stderr
    kinds = {k for k, _ in _docs(rendered)}
    assert proc.stdout.count("(server dry run)") == len(_docs(rendered))
    if values is ALL_ON:
        assert {"ServiceMonitor", "PrometheusRule", "CronJob", "PersistentVolumeClaim", "DaemonSet"} <= kinds
    if values is None:
        assert not {"ServiceMonitor", "PrometheusRule", "CronJob", "PersistentVolumeClaim"} & kinds


def test_configmap_is_a_valid_settings_file_with_every_section(helm_bin: str, tmp_path: Path) -> None:
    docs = _docs(_render(helm_bin, tmp_path, ALL_ON))
    path = tmp_path / "config.yaml"
    path.write_text(docs[("ConfigMap", "drs-scheduler-config")]["data"]["config.yaml"])
    s = load_settings(path)
    assert s.prometheus.api_url == "https://mimir.example/prometheus"
    assert s.normalisation.cpu_full == 0.8 and s.retrain.epochs == 5 and s.reward.slowdown_weight == 0.4
    assert s.scheduler.lease_namespace == NS and s.scheduler.model_path == "/opt/drs/custom-model/mine.keras"
    assert s.scheduler.journal_path == "/var/lib/drs/journal.sqlite" and s.retrain.model_store == "/var/lib/drs/models"
    dep = docs[("Deployment", "drs-scheduler")]["spec"]["template"]["spec"]
    assert dep["containers"][0]["image"] == "registry.example/drs-prom-scheduler:dev"
    ds = docs[("DaemonSet", "drs-node-exporter")]["spec"]["template"]["spec"]
    assert ds["containers"][0]["image"] == "registry.example/drs-prom-exporter:dev"
    vols = {v["name"]: v for v in dep["volumes"]}
    assert vols["state"]["persistentVolumeClaim"]["claimName"] == "drs-journal"
    assert vols["model"] == {"name": "model", "configMap": {"name": "my-model"}}
    cron = docs[("CronJob", "drs-retrain")]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {v["name"]: v for v in cron["volumes"]}["state"] == vols["state"]
    assert cron["containers"][0]["image"] == "registry.example/drs-prom-retrain:dev"


def test_chart_and_example_config_ship_safe_defaults(helm_bin: str, tmp_path: Path) -> None:
    """With the chart's defaults and with deploy/k8s's example config, the scheduler falls back to (and shadows
    with) capacity-balanced-overload and the guardrails are on, with the rules and thresholds config.py gives."""
    docs = _docs(_render(helm_bin, tmp_path))
    chart = tmp_path / "chart-config.yaml"
    chart.write_text(docs[("ConfigMap", "drs-scheduler-config")]["data"]["config.yaml"])
    plain_map = yaml.safe_load((K8S / "20-configmap.yaml").read_text())
    plain = tmp_path / "plain-config.yaml"
    plain.write_text(plain_map["data"]["config.yaml"])
    defaults = load_settings(None).rollout.guardrails
    for path in (chart, plain):
        s = load_settings(path)
        assert s.scheduler.fallback == "capacity-balanced-overload", path
        # the model the package ships (a pinned file would stay behind when a new default ships)
        assert s.scheduler.model_path == "" and s.scheduler.whole_node_reserve == 1, path
        assert s.scheduler.fill_window == FILL_WINDOW, path
        assert s.rollout.heuristic in ("", "capacity-balanced-overload") and s.rollout.mode == "normal", path
        g = s.rollout.guardrails
        assert g.enabled, path
        assert g.model_dump(exclude={"enabled"}) == defaults.model_dump(exclude={"enabled"}), path


def test_monitoring_objects_come_from_the_promql_source(helm_bin: str, tmp_path: Path) -> None:
    """One source of truth: the PrometheusRule and the dashboard are promql.py's output, as in deploy/prometheus."""
    assert (CHART / "files" / "drs.rules.yml").read_text() == promql.rules_yaml(), (
        "run: drs-prom promql rules > deploy/helm/drs-prom/files/drs.rules.yml"
    )
    assert (CHART / "files" / "drs-nodes.json").read_text() == promql.dashboard_json(), (
        "run: drs-prom promql dashboard > deploy/helm/drs-prom/files/drs-nodes.json"
    )
    docs = _docs(_render(helm_bin, tmp_path, ALL_ON))
    assert docs[("PrometheusRule", "drs-prom")]["spec"] == yaml.safe_load(promql.rules_yaml())
    dash = docs[("ConfigMap", "drs-prom-dashboard")]
    assert dash["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dash["data"]["drs-nodes.json"]) == json.loads(promql.dashboard_json())
    assert docs[("ServiceMonitor", "drs-node-exporter")]["metadata"]["labels"]["release"] == "kube-prometheus-stack"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mode": "both"}, "mode"),
        ({"kubeScheduler": {"httpTimeout": "2 seconds"}}, "httpTimeout"),
        ({"kubeScheduler": {"extenderWeight": 0}}, "extenderWeight"),
        ({"scheduler": {"replicas": 0}}, "replicas"),
        ({"settings": {"prometheus": {"url": "prometheus:9090"}}}, "url"),
        ({"retrain": {"cronjob": {"schedule": "hourly"}}}, "schedule"),
        ({"exporter": {"enabeld": False}}, "enabeld"),
        ({"settings": {"prometheus": {"url": "http://p:9090", "window": "30 seconds"}}}, "window"),
    ],
)
def test_bad_values_fail_at_install_with_a_clear_message(
    helm_bin: str, tmp_path: Path, values: dict, message: str
) -> None:
    out = _helm(helm_bin, "template", "drs", str(CHART), "-f", str(_values(tmp_path, values)), tmp=tmp_path)
    assert out.returncode != 0
    assert "values don't meet the specifications of the schema" in out.stderr and message in out.stderr, out.stderr


def test_deploy_k8s_says_what_the_chart_says(helm_bin: str, tmp_path: Path) -> None:
    """deploy/k8s (plain manifests) and the chart describe the same permissions and hardening."""
    chart = _docs(_render(helm_bin, tmp_path))
    plain = {
        (d["kind"], d["metadata"]["name"]): d
        for f in K8S.glob("*.yaml")
        for d in yaml.safe_load_all(f.read_text())
        if d
    }
    assert chart[("ClusterRole", "drs-scheduler-drs")]["rules"] == plain[("ClusterRole", "drs-scheduler")]["rules"]
    assert chart[("Role", "drs-scheduler-lease")]["rules"] == plain[("Role", "drs-scheduler-lease")]["rules"]
    for kind, name in [("Deployment", "drs-scheduler"), ("DaemonSet", "drs-node-exporter")]:
        c, p = chart[(kind, name)]["spec"]["template"]["spec"], plain[(kind, name)]["spec"]["template"]["spec"]
        assert c["securityContext"] == p["securityContext"], (kind, name)
        assert c["containers"][0]["securityContext"] == p["containers"][0]["securityContext"], (kind, name)
        assert c["containers"][0]["ports"] == p["containers"][0]["ports"], (kind, name)
        assert c["containers"][0]["resources"] == p["containers"][0]["resources"], (kind, name)
        assert c["containers"][0]["args"][: len(p["containers"][0]["args"])] == p["containers"][0]["args"], (kind, name)
    assert (
        chart[("Deployment", "drs-scheduler")]["spec"]["replicas"]
        == plain[("Deployment", "drs-scheduler")]["spec"]["replicas"]
    )


def test_helm_install_gives_the_scheduler_its_rbac(helm_bin: str, helm_ns, tmp_path: Path) -> None:
    kubeconfig = helm_ns.admin_kubeconfig
    release = "drs-it"
    sa = f"system:serviceaccount:{NS}:drs-scheduler"
    out = _helm(helm_bin, "install", release, str(CHART), "--namespace", NS, "-f", str(_values(tmp_path, ALL_ON)),
                kubeconfig=kubeconfig, tmp=tmp_path)  # fmt: skip
    try:
        assert out.returncode == 0, out.stderr
        assert "STATUS: deployed" in out.stdout and "kubectl auth can-i create pods/binding" in out.stdout  # NOTES.txt

        # As the ServiceAccount itself (a token from the TokenRequest API), as the scheduler pod would be.
        kc = helm_ns.make_sa_kubeconfig(NS, "drs-scheduler")

        def can(verb: str, resource: str, ns: str | None = None, sub: str | None = None) -> bool:
            return helm_ns.can_i(verb, resource, kubeconfig=kc, namespace=ns, subresource=sub)

        # The apiserver's RBAC authorizer reads bindings from an informer: allow it to catch up.
        wait_for(lambda: can("create", "pods", NS, "binding"), 30, "the new ClusterRoleBinding to take effect")
        assert can("list", "nodes") and can("watch", "pods", NS)
        assert can("patch", "events.events.k8s.io", NS)
        assert can("update", "leases/drs-scheduler", NS) and not can("update", "leases/other", NS)
        assert not can("get", "secrets", NS) and not can("update", "pods", NS)
        assert can("delete", "pods", NS) and can("patch", "pods", NS, "status")  # preemption's victims and nomination
        listed = _helm(helm_bin, "list", "--namespace", NS, "-o", "json", kubeconfig=kubeconfig, tmp=tmp_path)
        assert [r["status"] for r in json.loads(listed.stdout) if r["name"] == release] == ["deployed"]
    finally:
        un = _helm(helm_bin, "uninstall", release, "--namespace", NS, kubeconfig=kubeconfig, tmp=tmp_path)
        helm_ns.kubectl(
            "delete", "pvc", "drs-journal", "-n", NS, "--ignore-not-found", "--wait=false"
        )  # kept by its policy; no controller removes the finalizer here
        assert un.returncode == 0, un.stderr
    # the authorizer's informer lags the deletion as it lagged the creation
    wait_for(
        lambda: (
            helm_ns.kubectl("auth", "can-i", "create", "pods/binding", "-n", NS, f"--as={sa}").stdout.strip() == "no"
        ),
        30,
        "the ClusterRoleBinding's removal to take effect",
    )


def _settings_of(docs: dict, tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text(docs[("ConfigMap", "drs-scheduler-config")]["data"]["config.yaml"])
    return load_settings(path)


def test_defaults_serve_https_with_delegated_auth_and_the_rbac_it_needs(helm_bin: str, tmp_path: Path) -> None:
    """Like kube-scheduler's 10259: TLS, /metrics behind TokenReview + SubjectAccessReview, probes over HTTPS."""
    docs = _docs(_render(helm_bin, tmp_path))
    serving = _settings_of(docs, tmp_path).serving
    assert serving.tls == "self-signed" and serving.authenticate_metrics
    container = docs[("Deployment", "drs-scheduler")]["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTPS"}
    delegator = docs[("ClusterRoleBinding", "drs-scheduler-auth-delegator-drs")]
    assert delegator["roleRef"]["name"] == "system:auth-delegator"  # tokenreviews + subjectaccessreviews create
    assert delegator["subjects"] == [{"kind": "ServiceAccount", "name": "drs-scheduler", "namespace": NS}]
    reader = docs[("ClusterRole", "drs-metrics-reader-drs")]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert docs[("Deployment", "drs-scheduler")]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "localhost/drs-prom-scheduler:0.1.0"  # the name deploy/image builds, the tag the chart's appVersion
    )


def test_service_monitor_scrapes_over_https_with_prometheus_token(helm_bin: str, tmp_path: Path) -> None:
    docs = _docs(_render(helm_bin, tmp_path, {"serviceMonitor": {"enabled": True}}))
    (endpoint,) = docs[("ServiceMonitor", "drs-scheduler")]["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    values = {
        "serviceMonitor": {"enabled": True},
        "serving": {
            "tls": "secret",
            "tlsSecret": "drs-serving",
            "metricsReaders": [{"name": "prom", "namespace": "mon"}],
        },
    }
    docs = _docs(_render(helm_bin, tmp_path, values))
    (endpoint,) = docs[("ServiceMonitor", "drs-scheduler")]["spec"]["endpoints"]
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "drs-serving", "key": "ca.crt"}},
        "serverName": f"drs-scheduler-metrics.{NS}.svc",
    }
    serving = _settings_of(docs, tmp_path).serving
    assert (serving.tls, serving.cert_file, serving.key_file) == (
        "files",
        "/etc/drs/tls/tls.crt",
        "/etc/drs/tls/tls.key",
    )
    pod = docs[("Deployment", "drs-scheduler")]["spec"]["template"]["spec"]
    assert {"name": "tls", "secret": {"secretName": "drs-serving"}} in pod["volumes"]
    binding = docs[("ClusterRoleBinding", "drs-metrics-reader-drs")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "prom", "namespace": "mon"}]


def test_plain_http_only_when_the_values_say_so(helm_bin: str, tmp_path: Path) -> None:
    plain = {"serving": {"tls": "off", "authenticateMetrics": False}, "serviceMonitor": {"enabled": True}}
    docs = _docs(_render(helm_bin, tmp_path, plain))
    serving = _settings_of(docs, tmp_path).serving
    assert serving.tls == "off" and not serving.authenticate_metrics
    container = docs[("Deployment", "drs-scheduler")]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    (endpoint,) = docs[("ServiceMonitor", "drs-scheduler")]["spec"]["endpoints"]
    assert "scheme" not in endpoint and "bearerTokenFile" not in endpoint
    assert not [k for k in docs if k[1].startswith("drs-scheduler-auth-delegator")]
    # tokens over plain HTTP are refused at render time, with what to change
    out = _helm(helm_bin, "template", "drs", str(CHART), "-f", str(_values(tmp_path, {"serving": {"tls": "off"}})),
                tmp=tmp_path)  # fmt: skip
    assert out.returncode != 0 and "serving.authenticateMetrics sends bearer tokens" in out.stderr


@pytest.mark.parametrize("mode", ["scheduler", "extender"])
def test_helm_test_hook_checks_readyz_and_the_recording_rules(helm_bin: str, tmp_path: Path, mode: str) -> None:
    docs = _docs(_render(helm_bin, tmp_path, {"mode": mode, "promStoreSecret": "prom-creds"}))
    pod = docs[("Pod", "drs-prom-test")]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "localhost/drs-prom-scheduler:0.1.0"
    url = (
        f"https://drs-scheduler-metrics.{NS}.svc:10259"
        if mode == "scheduler"
        else f"https://drs-extender.{NS}.svc:8888"
    )
    assert container["args"] == ["check-install", "--config", "/etc/drs/config.yaml", "--scheduler", url,
                                 "--insecure-skip-verify"]  # fmt: skip
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts == {"config", "tmp", "prom-store"}  # the settings and Prometheus' credentials; no journal volume
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert not [k for k in _docs(_render(helm_bin, tmp_path, {"tests": {"enabled": False}})) if k[0] == "Pod"]


def test_metrics_of_a_scheduler_served_with_the_charts_settings_need_a_token(
    helm_bin: str, helm_ns, tmp_path: Path
) -> None:
    """helm install (defaults, plus a metrics reader) on the harness apiserver; then the scheduler's port served
    with the installed settings and as the installed ServiceAccount: no token 401, a token without the binding
    403, the bound reader's token 200, probes open."""
    import ssl
    import urllib.error
    import urllib.request

    from drs_prom.scheduler.http.server import HealthServer
    from drs_prom.scheduler.metrics import SchedulerMetrics

    kubeconfig = helm_ns.admin_kubeconfig
    release = "drs-auth"
    values = {"exporter": {"enabled": False}, "serving": {"metricsReaders": [{"name": "prom", "namespace": NS}]}}
    out = _helm(helm_bin, "install", release, str(CHART), "--namespace", NS, "-f", str(_values(tmp_path, values)),
                kubeconfig=kubeconfig, tmp=tmp_path)  # fmt: skip
    api = None
    server = None
    try:
        assert out.returncode == 0, out.stderr
        cm = helm_ns.kubectl("get", "configmap", "drs-scheduler-config", "-n", NS, "-o", "json", check=True)
        config = tmp_path / "installed.yaml"
        config.write_text(json.loads(cm.stdout)["data"]["config.yaml"])
        serving = load_settings(config).serving
        assert serving.tls == "self-signed" and serving.authenticate_metrics

        def token(sa: str) -> str:
            return yaml.safe_load(helm_ns.make_sa_kubeconfig(NS, sa).read_text())["users"][0]["user"]["token"]

        api = helm_ns.api_client(helm_ns.make_sa_kubeconfig(NS, "drs-scheduler"))  # who the scheduler pod runs as
        server = HealthServer("127.0.0.1:0", SchedulerMetrics().registry, lambda: True, lambda: True, serving, api)
        server.start()
        ctx = ssl.create_default_context(cafile=str(server.cert_file))
        base = f"https://127.0.0.1:{server.port}"

        def status(path: str, bearer: str | None = None) -> int:
            req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {bearer}"} if bearer else {})
            try:
                with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                    return r.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert status("/metrics") == 401
        assert status("/readyz") == 200 and status("/healthz") == 200
        stranger, reader = token("stranger"), token("prom")
        # the apiserver's RBAC authorizer sees the chart's new bindings (auth-delegator for the scheduler, the
        # reader's) through an informer: allow it to catch up
        wait_for(lambda: status("/metrics", reader) == 200, 30, "the chart's bindings to take effect")
        assert status("/metrics", stranger) == 403
        assert status("/metrics", "not-a-token") == 401
    finally:
        if server is not None:
            server.stop()
        if api is not None:
            api.close()
        un = _helm(helm_bin, "uninstall", release, "--namespace", NS, kubeconfig=kubeconfig, tmp=tmp_path)
        assert un.returncode == 0, un.stderr


def _kube_scheduler_config(docs: dict) -> dict:
    return yaml.safe_load(docs[("ConfigMap", "drs-kube-scheduler-config")]["data"]["config.yaml"])


def test_kube_scheduler_mode_runs_a_second_upstream_scheduler_that_asks_the_extender_for_scores(
    helm_bin: str, tmp_path: Path
) -> None:
    """mode kube-scheduler: drs-prom's extender (as in extender mode) plus a kube-scheduler Deployment of the upstream
    image, its own profile and Lease, upstream's RBAC, and an extender stanza with prioritize only."""
    docs = _docs(_render(helm_bin, tmp_path, {"mode": "kube-scheduler"}))
    assert ("Deployment", "drs-extender") in docs and ("Deployment", "drs-scheduler") not in docs
    dep = docs[("Deployment", "drs-kube-scheduler")]
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-scheduler:v1.35.4"
    assert container["args"][0] == "--config=/etc/drs-kube-scheduler/config.yaml"
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True and pod["serviceAccountName"] == (
        "drs-kube-scheduler"
    )
    assert dep["spec"]["replicas"] == 2
    cfg = _kube_scheduler_config(docs)
    assert cfg["kind"] == "KubeSchedulerConfiguration" and cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert cfg["profiles"] == [{"schedulerName": "drs-scheduler"}]  # the name drs-prom's own scheduler answers to
    assert cfg["leaderElection"] == {
        "leaderElect": True,
        "resourceLock": "leases",
        "resourceName": "drs-kube-scheduler",
        "resourceNamespace": NS,
    }
    (ext,) = cfg["extenders"]
    assert "filterVerb" not in ext and ext["prioritizeVerb"] == "prioritize"
    assert ext["urlPrefix"] == f"https://drs-extender.{NS}.svc:8888"
    assert ext["enableHTTPS"] and ext["tlsConfig"] == {"insecure": True}  # serving.tls self-signed, as the extender
    assert ext["nodeCacheCapable"] and ext["ignorable"] and ext["weight"] == 5 and ext["httpTimeout"] == "2s"
    bound = {
        d["roleRef"]["name"]: d["subjects"]
        for (kind, _), d in docs.items()
        if kind in ("ClusterRoleBinding", "RoleBinding") and d["subjects"][0]["name"] == "drs-kube-scheduler"
    }
    sa = [{"kind": "ServiceAccount", "name": "drs-kube-scheduler", "namespace": NS}]
    assert bound == {
        "system:kube-scheduler": sa,
        "system:volume-scheduler": sa,
        "extension-apiserver-authentication-reader": sa,
        "drs-kube-scheduler-lease": sa,
    }
    lease = docs[("Role", "drs-kube-scheduler-lease")]["rules"]
    assert lease[1] == {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["drs-kube-scheduler"],
        "verbs": ["get", "update"],
    }
    assert not [k for k in _docs(_render(helm_bin, tmp_path)) if "kube-scheduler" in k[1]]  # other modes: none of it


@pytest.mark.parametrize(
    ("values", "extender"),
    [
        (
            {"serving": {"tls": "off", "authenticateMetrics": False}},
            {"urlPrefix": f"http://drs-extender.{NS}.svc:8888", "enableHTTPS": False},
        ),
        (
            {"serving": {"tls": "secret", "tlsSecret": "drs-serving"}},
            {
                "urlPrefix": f"https://drs-extender.{NS}.svc:8888",
                "enableHTTPS": True,
                "tlsConfig": {"caFile": "/etc/drs/tls/ca.crt", "serverName": f"drs-extender.{NS}.svc"},
            },
        ),
        (
            {"kubeScheduler": {"filter": True, "extenderWeight": 2, "ignorable": False, "leaderElection": False}},
            {"filterVerb": "filter", "weight": 2, "ignorable": False},
        ),
    ],
    ids=["plain-http", "tls-secret", "filter-asked"],
)
def test_kube_scheduler_mode_reaches_the_extender_as_it_is_served(
    helm_bin: str, tmp_path: Path, values: dict, extender: dict
) -> None:
    """The extender stanza follows the chart's serving values (the extender's own TLS), and the filter verb is
    there only when asked for."""
    docs = _docs(_render(helm_bin, tmp_path, {"mode": "kube-scheduler", **values}))
    (ext,) = _kube_scheduler_config(docs)["extenders"]
    assert {k: ext.get(k) for k in extender} == extender
    pod = docs[("Deployment", "drs-kube-scheduler")]["spec"]["template"]["spec"]
    if values.get("serving", {}).get("tls") == "secret":  # the CA the extender's certificate is verified with
        assert {
            "name": "tls",
            "secret": {"secretName": "drs-serving", "items": [{"key": "ca.crt", "path": "ca.crt"}]},
        } in (pod["volumes"])
        assert {"name": "tls", "mountPath": "/etc/drs/tls", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    if values.get("kubeScheduler", {}).get("leaderElection") is False:
        assert _kube_scheduler_config(docs)["leaderElection"] == {"leaderElect": False}
        assert ("Role", "drs-kube-scheduler-lease") not in docs


def test_the_testbeds_kube_scheduler_plus_drs_is_the_charts_second_scheduler(helm_bin: str, tmp_path: Path) -> None:
    """``drs-prom testbed --schedulers kube-scheduler+drs`` measures what the chart deploys: the same profile and
    extender stanza (the testbed reaches the extender on loopback over plain HTTP)."""
    from drs_prom.testbed.schedulers import second_scheduler_config

    plain = {"mode": "kube-scheduler", "serving": {"tls": "off", "authenticateMetrics": False}}
    chart = _kube_scheduler_config(_docs(_render(helm_bin, tmp_path, plain)))
    testbed = second_scheduler_config("http://127.0.0.1:1")
    assert chart["profiles"] == testbed["profiles"]
    (rendered,) = chart["extenders"]
    (ours,) = testbed["extenders"]
    assert {**rendered, "urlPrefix": ""} == {**ours, "urlPrefix": ""}
