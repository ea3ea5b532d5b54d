"""Locating (and, when asked, building) the cached Kubernetes binaries the testbed runs.

The recipe is ``k8s_recipe/build.sh`` beside this module, with its pinned ``go.mod``: it
builds kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd from the Go module proxy into
``~/.cache/drs-prom/k8s-<version>/bin`` once, and is a sub-second no-op afterwards. It ships
inside the package (package data), so an installed drs-prom can build its testbed's
binaries with ``drs-prom testbed --build`` and no source checkout; ``DRS_K8S_BUILD_DIR``
points at another recipe. This module only finds the recipe's output or runs it.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

from drs_prom.errors import DrsError

K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd")


class ControlPlaneError(DrsError, RuntimeError):
    """A control-plane binary is missing, or a process failed to start or became unhealthy."""


def build_dir() -> Path:
    """The folder holding build.sh and its go.mod (the recipe shipped in this package by default)."""
    env = os.environ.get("DRS_K8S_BUILD_DIR")
    return Path(env) if env else Path(__file__).resolve().parent / "k8s_recipe"


def k8s_version() -> str:
    """The ``k8s.io/kubernetes`` version pinned in build.sh's go.mod (e.g. ``v1.35.4``)."""
    try:
        text = (build_dir() / "go.mod").read_text()
    except OSError as exc:
        raise ControlPlaneError(f"cannot read {build_dir() / 'go.mod'}: {exc.strerror}") from None
    m = re.search(r"^require\s+k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE) or re.search(
        r"^\s*k8s\.io/kubernetes\s+(v\S+)", text, re.MULTILINE
    )
    if not m:
        raise ControlPlaneError(f"cannot find the k8s.io/kubernetes version in {build_dir() / 'go.mod'}")
    return m.group(1)


def default_cache_dir() -> Path:
    env = os.environ.get("DRS_K8S_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "drs-prom" / f"k8s-{k8s_version()}"


def find_bin_dir() -> Path:
    """Where build.sh puts the binaries ($DRS_K8S_BIN overrides). Does not build."""
    env = os.environ.get("DRS_K8S_BIN")
    return Path(env) if env else default_cache_dir() / "bin"


def missing_binaries(bin_dir: Path) -> list[str]:
    return [b for b in K8S_BINARIES if not (bin_dir / b).exists()]


def how_to_build() -> str:
    """The one-line remedy a missing-binary error ends with: works from an installed package."""
    return "build them once with `drs-prom testbed --build` (Go >= 1.25 on PATH, 10-20 min) or set DRS_K8S_BIN"


def run_recipe(script: Path, log_file: Path, timeout: float) -> Path:
    """Run a build recipe (``bash script`` in its folder, stderr to ``log_file``) and return the path it prints last.

    Every recipe here is idempotent, locked and prints its output's path as the last line of stdout. Raises
    ControlPlaneError with a one-line reason on failure."""
    try:
        with open(log_file, "wb") as err:
            proc = subprocess.run(
                ["bash", str(script)],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
                cwd=str(script.parent),
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise ControlPlaneError(f"{script.name} timed out after {timeout:.0f}s (log: {log_file})") from None
    except OSError as e:
        raise ControlPlaneError(f"cannot run {script}: {e}") from None
    if proc.returncode != 0:
        tail = [ln for ln in log_file.read_text(errors="replace").splitlines() if ln.strip()]
        why = next((ln for ln in reversed(tail) if "ERROR" in ln), tail[-1] if tail else "no output")
        raise ControlPlaneError(f"{script} failed rc={proc.returncode}: {why.strip()} (log: {log_file})")
    lines = [ln for ln in proc.stdout.decode(errors="replace").splitlines() if ln.strip()]
    if not lines:
        raise ControlPlaneError(f"{script} printed no path (log: {log_file})")
    return Path(lines[-1].strip())


def build_binaries(timeout: float = 3600.0, log_path: str | os.PathLike[str] | None = None) -> Path:
    """Run build.sh (fast no-op when already built) and return the bin dir.

    Raises ControlPlaneError with a one-line reason on failure.
    """
    log_file = Path(log_path) if log_path else Path(tempfile.gettempdir()) / "drs-prom-k8s-build.log"
    bin_dir = run_recipe(build_dir() / "build.sh", log_file, timeout)
    missing = missing_binaries(bin_dir)
    if missing:
        raise ControlPlaneError(f"build.sh succeeded but {bin_dir} lacks {', '.join(missing)}")
    return bin_dir
