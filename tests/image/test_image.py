"""The images, one per role, built here by deploy/image/build.sh (debootstrap base + buildah, no registry) from
deploy/image/Containerfile and started with podman as the non-root user with a read-only root filesystem:

- exporter: serves node_exporter's names, and carries no numpy, pydantic or TensorFlow;
- scheduler: `drs-prom run` binds a pod on the harness apiserver (as the drs-scheduler ServiceAccount), runs a
  short bench with the shipped model, and carries no TensorFlow;
- retrain: `drs-prom retrain --once` on an empty journal reports insufficient data.

Opt-in: the first build downloads a Debian root, then the Python packages (TensorFlow for retrain): tens of
minutes. Set DRS_TEST_IMAGE=1 to run these tests. Skipped with the reason when podman cannot start containers here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from tests.prom.fixtures import free_port
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("DRS_TEST_IMAGE") != "1", reason="image tests are opt-in: DRS_TEST_IMAGE=1"),
]

REPO = Path(__file__).resolve().parents[2]
ROLES = ("exporter", "scheduler", "retrain")
# Hosts without CAP_SYS_RESOURCE refuse podman's default rlimits; a cgroup-v1/v2 hybrid host needs runc.
RUNTIME = ["--runtime", "runc"] if shutil.which("runc") else []
LIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
HARDENED = ["--read-only", "--tmpfs", "/tmp:rw,size=256m", "--network", "host", "--cap-drop", "ALL"]


def _podman(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *RUNTIME, "--cgroup-manager", "cgroupfs", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    """role -> image name, built by the command docs/install.md gives."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman buildah debootstrap runc)")
    build = subprocess.run(
        ["bash", str(REPO / "deploy" / "image" / "build.sh"), *ROLES],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if build.returncode != 0:
        pytest.fail(f"image build failed: {build.stderr.strip()[-1500:]}", pytrace=False)
    names = build.stdout.strip().splitlines()[-len(ROLES) :]
    out = dict(zip(ROLES, names))
    assert all(out[r].startswith(f"localhost/drs-prom-{r}:") for r in ROLES), out
    probe = _podman("run", "--rm", *LIMITS, "--entrypoint", "true", out["exporter"])
    if probe.returncode != 0:
        pytest.skip(f"podman cannot run containers on this host: {probe.stderr.strip()[-300:]}")
    for name in out.values():
        size = _podman("image", "inspect", name, "--format", "{{.Size}}").stdout.strip()
        print(f"\nimage {name}: {int(size) / 1e6:.0f} MB")
    return out


def _run(
    image: str, *args: str, entrypoint: str | None = None, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    ep = ["--entrypoint", entrypoint] if entrypoint else []
    return _podman("run", "--rm", *LIMITS, *HARDENED, *extra, *ep, image, *args)


def _imports(image: str, modules: tuple[str, ...]) -> dict[str, bool]:
    code = (
        "import importlib.util, json, sys; "
        f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {list(modules)!r}}}))"
    )
    out = _run(image, "-c", code, entrypoint="python3")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("role", ROLES)
def test_non_root_and_read_only(images: dict[str, str], role: str) -> None:
    out = _run(images[role], "--help")
    assert out.returncode == 0, out.stderr
    assert "drs-prom: a Kubernetes scheduler" in out.stdout
    assert _run(images[role], "-u", entrypoint="id").stdout.strip() == "65532"
    ro = _run(images[role], "-c", "touch /opt/x", entrypoint="/bin/sh")
    assert ro.returncode != 0 and "Read-only file system" in ro.stderr


def test_each_role_carries_only_what_it_runs(images: dict[str, str]) -> None:
    heavy = ("tensorflow", "keras", "numpy", "pydantic", "kubernetes")
    assert _imports(images["exporter"], ("psutil", "prometheus_client", *heavy)) == {
        "psutil": True, "prometheus_client": True, **dict.fromkeys(heavy, False)
    }  # fmt: skip
    assert _imports(images["scheduler"], ("h5py", "kubernetes", "tensorflow", "keras")) == {
        "h5py": True, "kubernetes": True, "tensorflow": False, "keras": False
    }  # fmt: skip
    assert _imports(images["retrain"], ("tensorflow", "keras")) == {"tensorflow": True, "keras": True}


def test_exporter_serves_node_exporter_names(images: dict[str, str]) -> None:
    port = free_port()
    name = f"drs-exporter-{uuid.uuid4().hex[:8]}"
    started = _podman("run", "-d", "--name", name, *LIMITS, *HARDENED, images["exporter"],
                      "export", "--listen", f"127.0.0.1:{port}", "--node-name", "img-node", "--log-format", "json")  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        body = wait_for(lambda: _get(f"http://127.0.0.1:{port}/metrics"), 60, "the exporter in the container")
        assert re.search(r'node_uname_info\{[^}]*nodename="img-node"', body), body[:2000]
        assert re.search(r'node_cpu_seconds_total\{cpu="0",mode="idle"\} \d', body), body[:2000]
        assert "node_memory_MemTotal_bytes" in body
    finally:
        _podman("rm", "-f", name, timeout=60)


def test_scheduler_bench_with_the_shipped_model(images: dict[str, str]) -> None:
    out = _run(images["scheduler"], "bench", "--pods", "10", "--seeds", "1", "--no-progress", "--out", "/tmp/bench")
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"^drs\s+\d", out.stdout, re.MULTILINE), out.stdout
    assert not re.search(r"absl|oneDNN|cuda|cpu_feature_guard", out.stderr, re.IGNORECASE), out.stderr


def test_scheduler_binds_a_pod_on_the_harness_apiserver(images: dict[str, str], control_plane, tmp_path: Path) -> None:
    """`drs-prom run` in the container, as deploy/k8s's drs-scheduler ServiceAccount; no Prometheus answers
    (a closed loopback port), so it binds with its fallback, as it would in a cluster whose metrics are down."""
    from kubernetes import client

    for f in ("00-namespace.yaml", "10-rbac.yaml"):
        control_plane.kubectl("apply", "-f", str(REPO / "deploy" / "k8s" / f), check=True)
    kubeconfig = control_plane.make_sa_kubeconfig("drs-system", "drs-scheduler")
    ns, node = f"img-{uuid.uuid4().hex[:6]}", f"img-node-{uuid.uuid4().hex[:6]}"
    control_plane.create_namespace(ns)
    control_plane.create_fake_node(node, cpu="4", memory="8Gi")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 1},
                "scheduler": {
                    "namespace": ns,
                    "metrics_listen": f"127.0.0.1:{free_port()}",
                    "leader_election": False,
                    "journal_path": "/tmp/journal.sqlite",
                },
            }
        )
    )
    os.chmod(kubeconfig, 0o644)  # read by uid 65532 inside the container
    name = f"drs-scheduler-{uuid.uuid4().hex[:8]}"
    mounts = ["-v", f"{kubeconfig}:/etc/drs/kubeconfig:ro", "-v", f"{config}:/etc/drs/config.yaml:ro"]
    started = _podman("run", "-d", "--name", name, *LIMITS, *HARDENED, *mounts, "-e", "KUBECONFIG=/etc/drs/kubeconfig",
                      images["scheduler"], "run", "--config", "/etc/drs/config.yaml")  # fmt: skip
    assert started.returncode == 0, started.stderr
    core = client.CoreV1Api(control_plane.admin_client)
    try:
        core.create_namespaced_pod(
            ns,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p"},
                "spec": {
                    "schedulerName": "drs-scheduler",
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        )
        bound = wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, 90, "the pod to be bound")
        assert bound == node
    finally:
        logs = _podman("logs", name, timeout=60)
        _podman("rm", "-f", name, timeout=60)
        core.delete_node(node)
        print(logs.stderr[-2000:])


def test_retrain_once_reports_insufficient_data(images: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 1},
                "scheduler": {"journal_path": "/tmp/journal.sqlite"},
                "retrain": {"model_store": "/tmp/models"},
            }
        )
    )
    out = _run(images["retrain"], "retrain", "--once", "--json", "--config", "/etc/drs/config.yaml",
               extra=("-v", f"{config}:/etc/drs/config.yaml:ro"))  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["result"] == "insufficient_data"


def _get(url: str) -> str | None:
    try:
        return requests.get(url, timeout=5).text
    except requests.RequestException:
        return None
