"""The base install (no ``[train]`` extra) serves, exports and benchmarks; training says in one line what to add.

The suite's own environment has the extra installed (``make test`` installs everything), so these tests run the
real ``drs-prom`` in a child process whose imports of ``tensorflow`` and ``keras`` fail exactly as they do in a
base install: a meta-path finder raises ModuleNotFoundError for them before any other finder can look. A fake,
because the absence of a package cannot be produced in an environment that has it; the control test shows the
finder really blocks. (docs/install.md measures the real base venv.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from drs_prom.extras import TRAIN_INSTALL

BLOCK_TRAIN = textwrap.dedent(
    """
    import importlib.abc, sys

    class _NoTrainExtra(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "keras"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoTrainExtra())
    """
)
"""Run first in the child: from then on ``import tensorflow`` fails as in an environment without it."""

RUN_CLI = "import runpy; sys.argv = ['drs-prom', *sys.argv[1:]]; runpy.run_module('drs_prom.cli', run_name='__main__')"

HEAVY = ("tensorflow", "keras")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KERAS_"))}


def _base_install(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``drs-prom ARGS`` as a base install runs it (TensorFlow and Keras cannot be imported)."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK_TRAIN + RUN_CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
        cwd=cwd,
        check=False,
    )


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=_env(), check=False
    )


def test_the_blocker_makes_tensorflow_unimportable() -> None:
    """Control: without it the tests below would pass whether or not the code imports TensorFlow."""
    out = _python(BLOCK_TRAIN + "import tensorflow")
    assert out.returncode == 1
    assert "ModuleNotFoundError: No module named 'tensorflow'" in out.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--episodes", "1", "--out", "never.keras"],
        ["retrain", "--once"],
    ],
)
def test_training_commands_without_the_extra_say_what_to_install(command: list[str], tmp_path: Path) -> None:
    out = _base_install(*command, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert lines == [
        f"drs-prom: error: drs-prom {command[0]} needs TensorFlow and Keras, which the base install "
        f"leaves out: {TRAIN_INSTALL}"
    ]
    assert not list(tmp_path.iterdir())  # stopped before any work


def test_serving_modules_import_no_tensorflow() -> None:
    """The scheduler, the extender, the exporter, state and the bench load the shipped model and decide, and
    ``tensorflow``/``keras`` stay out of sys.modules (the model is read with h5py, scored with numpy)."""
    code = textwrap.dedent(
        """
        import sys
        import drs_prom.cli, drs_prom.scheduler.runner, drs_prom.scheduler.http.extender, drs_prom.signals.state
        import drs_prom.sim.bench, drs_prom.registry, exporters.node_exporter
        from drs_prom.registry import make_policy
        from tests.specs import SPEC
        for name in ("drs", "drs-original"):
            make_policy(name, SPEC, 0)
        print(sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras"}))
        """
    )
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_exporter_imports_only_psutil_and_prometheus_client() -> None:
    """The exporter image installs psutil and prometheus-client only: no pydantic, PyYAML, numpy or click."""
    code = (
        "import sys, exporters.node_exporter as ne; ne.read_psutil(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'yaml', 'numpy', 'click', 'requests'}))"
    )
    out = _python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_bench_runs_on_a_base_install(tmp_path: Path) -> None:
    out = _base_install(
        "bench",
        "--seeds",
        "1",
        "--pods",
        "20",
        "--policies",
        "kube-default,drs,drs-original",
        "--no-progress",
        "--out",
        str(tmp_path / "bench"),
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    assert "drs-original" in out.stdout
    assert "Traceback" not in out.stderr


EXPORTER_ONLY = textwrap.dedent(
    """
    import importlib.abc, sys

    ALLOWED = {"click", "psutil", "prometheus_client", "drs_prom", "exporters"}

    class _ExporterImage(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in ALLOWED or top in sys.stdlib_module_names:
                return None
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, _ExporterImage())
    """
)
"""What the exporter image installs: click, psutil and prometheus-client beside the drs-prom wheel; every other
third-party import fails as it would there (a fake for the same reason as BLOCK_TRAIN)."""


def test_export_serves_with_only_the_exporter_images_packages() -> None:
    import requests

    from tests.waiting import wait_for

    proc = subprocess.Popen(
        [sys.executable, "-c", EXPORTER_ONLY + RUN_CLI, "export", "--listen", "127.0.0.1:0", "--node-name", "lean"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/metrics", first)
        assert url, first + proc.stderr.read(2000) if proc.poll() is not None else first

        def scrape() -> str | None:
            try:
                return requests.get(url.group(0), timeout=5).text
            except requests.RequestException:
                return None

        body = wait_for(scrape, 30, "the exporter's /metrics")
        assert 'nodename="lean"' in body and "node_cpu_seconds_total" in body
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
