"""The container image, built here (deploy/image/build.sh: debootstrap + buildah, no registry) and started
with podman: --help, a short benchmark with the shipped model, the exporter scraped over loopback, all as
the non-root user with a read-only root filesystem.

Opt-in: the first build downloads a Debian root and TensorFlow into the image (minutes); set
DRS_TEST_IMAGE=1 to run these tests. Skipped with the reason when podman cannot start containers here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

from tests.prom.fixtures import free_port
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("DRS_TEST_IMAGE") != "1", reason="image tests are opt-in: DRS_TEST_IMAGE=1"),
]

REPO = Path(__file__).resolve().parents[2]
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
def image() -> str:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman buildah debootstrap runc)")
    build = subprocess.run(
        ["bash", str(REPO / "deploy" / "image" / "build.sh")], capture_output=True, text=True, timeout=3600, check=False
    )
    if build.returncode != 0:
        pytest.fail(f"image build failed: {build.stderr.strip()[-1500:]}", pytrace=False)
    name = build.stdout.strip().splitlines()[-1]
    probe = _podman("run", "--rm", *LIMITS, "--entrypoint", "true", name)
    if probe.returncode != 0:
        pytest.skip(f"podman cannot run containers on this host: {probe.stderr.strip()[-300:]}")
    size = _podman("image", "inspect", name, "--format", "{{.Size}}").stdout.strip()
    print(f"\nimage {name}: {int(size) / 1e6:.0f} MB")
    return name


def _run(image: str, *args: str, entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--entrypoint", entrypoint] if entrypoint else []
    return _podman("run", "--rm", *LIMITS, *HARDENED, *extra, image, *args)


def test_help_and_user(image: str) -> None:
    out = _run(image, "--help")
    assert out.returncode == 0, out.stderr
    assert "drs-prom: a Kubernetes scheduler" in out.stdout
    ids = _run(image, "-u", entrypoint="id")
    assert ids.stdout.strip() == "65532"
    ro = _run(image, "-c", "touch /opt/x", entrypoint="/bin/sh")
    assert ro.returncode != 0 and "Read-only file system" in ro.stderr


def test_bench_with_the_shipped_model(image: str) -> None:
    out = _run(image, "bench", "--pods", "10", "--seeds", "1", "--no-progress", "--out", "/tmp/bench")
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"^drs\s+\d", out.stdout, re.MULTILINE), out.stdout
    assert not re.search(r"absl|oneDNN|cuda|cpu_feature_guard", out.stderr, re.IGNORECASE), out.stderr


def test_exporter_serves_and_is_scraped(image: str) -> None:
    port = free_port()
    name = f"drs-exporter-{uuid.uuid4().hex[:8]}"
    started = _podman("run", "-d", "--name", name, *LIMITS, *HARDENED, image,
                      "export", "--listen", f"127.0.0.1:{port}", "--node-name", "img-node", "--log-format", "json")  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        body = wait_for(lambda: _get(f"http://127.0.0.1:{port}/metrics"), 60, "the exporter in the container")
        assert re.search(r'node_uname_info\{[^}]*nodename="img-node"', body), body[:2000]
        assert re.search(r'node_cpu_seconds_total\{cpu="0",mode="idle"\} \d', body), body[:2000]
        assert "node_memory_MemTotal_bytes" in body
    finally:
        _podman("rm", "-f", name, timeout=60)


def _get(url: str) -> str | None:
    try:
        return requests.get(url, timeout=5).text
    except requests.RequestException:
        return None
