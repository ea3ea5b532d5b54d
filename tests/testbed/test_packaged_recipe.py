"""The testbed works from an installed package: the Kubernetes build recipe ships inside the wheel, and
missing binaries give one line that says how to build them (with a command the package itself has)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from drs_prom.testbed.build import K8S_BINARIES, build_dir, k8s_version

REPO = Path(__file__).resolve().parents[2]
RECIPE = ("build.sh", "go.mod", "go.sum", "tools.go")


def test_the_wheel_carries_the_build_recipe(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        check=True,
        timeout=300,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("drs_prom-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in RECIPE:
        assert f"drs_prom/testbed/k8s_recipe/{f}" in names
        assert f"drs_prom/testbed/descheduler_recipe/{f}" in names


def test_the_recipe_is_found_beside_the_module_and_names_the_pinned_version(monkeypatch):
    monkeypatch.delenv("DRS_K8S_BUILD_DIR", raising=False)
    assert build_dir() == REPO / "drs_prom" / "testbed" / "k8s_recipe"
    assert all((build_dir() / f).is_file() for f in RECIPE)
    assert k8s_version().startswith("v1.")


def test_missing_binaries_are_one_line_naming_the_build_command(tmp_path):
    env_bin = tmp_path / "empty-bin"
    env_bin.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "drs_prom",
            "testbed",
            "--seeds",
            "1",
            "--pods",
            "2",
            "--no-bench",
            "--out",
            str(tmp_path),
        ],
        env={**_env(), "DRS_K8S_BIN": str(env_bin)},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "drs-prom testbed --build" in lines[0]
    assert any(b in lines[0] for b in K8S_BINARIES) and "not found" in lines[0]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DRS_K8S")} | {"PYTHONPATH": str(REPO)}
