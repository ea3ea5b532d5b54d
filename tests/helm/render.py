"""The chart rendered by a real helm (built from the Go module proxy by deploy/helm/tools/build.sh, a no-op once
cached), for the chart tests and for the tests that run what the chart renders on the harness."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "drs-prom"


def helm_binary() -> str:
    """The path of the helm the tests use; RuntimeError with build.sh's last words when it cannot be built."""
    proc = subprocess.run(
        ["bash", str(REPO / "deploy" / "helm" / "tools" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"helm build failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def helm(
    helm_bin: str, *args: str, kubeconfig: Path | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(tmp or "/tmp"), "HELM_CACHE_HOME": str((tmp or Path("/tmp")) / ".helm-cache")}
    env["PATH"] = "/usr/bin:/bin"
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([helm_bin, *args], capture_output=True, text=True, timeout=300, env=env, check=False)


def values_file(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def render(helm_bin: str, tmp_path: Path, values: dict[str, Any] | None = None, namespace: str = "drs-helm") -> str:
    """``helm template drs`` of the chart with ``values``; AssertionError with helm's message when it fails."""
    args = ["template", "drs", str(CHART), "--namespace", namespace]
    if values:
        args += ["-f", str(values_file(tmp_path, values))]
    out = helm(helm_bin, *args, tmp=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def documents(rendered: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, name) -> object of every document in a rendering."""
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(rendered) if d}
