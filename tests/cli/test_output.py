"""What a newcomer sees: the real ``drs-prom`` command in a subprocess, with a clean environment.

tests/conftest.py exports TF_CPP_MIN_LOG_LEVEL for the suite itself; these tests drop every
TF_/KERAS_/CUDA_ variable from the child's environment so they see what a user's shell gives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import requests

from tests.waiting import wait_for

DRS = [sys.executable, "-m", "drs_prom.cli"]
# What TensorFlow/absl/Keras print at start-up: absl's C++ prefix (I0000/W0000 00:00:...),
# its pre-InitializeLog banner, oneDNN, CUDA probing, the CPU feature guard, Python warnings.
TF_NOISE = re.compile(
    r"absl|oneDNN|onednn|cuda|cuInit|cpu_feature_guard|tensorflow|TF_ENABLE|[IWEF]0000 |UserWarning|"
    r"DeprecationWarning|rebuild TensorFlow",
    re.IGNORECASE,
)
# tqdm redraws its bar with \r; every frame starts with the bar's description.
PROGRESS_FRAME = re.compile(r"^\s*(bench [\w-]+: .*)?\s*$")


def _user_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "KERAS_", "CUDA_"))}


def _drs(*args: str, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DRS, *args], capture_output=True, text=True, timeout=timeout, env=_user_env(), cwd=cwd, check=False
    )


def _noise(stderr: str) -> list[str]:
    return [line for line in re.split(r"[\r\n]", stderr) if TF_NOISE.search(line)]


def test_main_module_is_the_console_script() -> None:
    """The tests call ``python -m drs_prom.cli``; it must be the same entry point as ``drs-prom``."""
    out = _drs("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"drs-prom {version('drs-prom')}"
    assert out.stderr == ""


def test_tensorflow_prints_start_up_noise_when_verbose() -> None:
    """The control: TensorFlow really does print start-up lines here when asked to (-v), so the
    quiet assertions below can fail. The same code path the CLI uses (quiet_libraries)."""
    code = (
        "from drs_prom.ops.logs import quiet_libraries; quiet_libraries({v}); import tensorflow as tf; tf.constant(1.0)"
    )
    loud = subprocess.run(
        [sys.executable, "-c", code.format(v=True)],
        capture_output=True,
        text=True,
        env=_user_env(),
        timeout=300,
        check=False,
    )
    quiet = subprocess.run(
        [sys.executable, "-c", code.format(v=False)],
        capture_output=True,
        text=True,
        env=_user_env(),
        timeout=300,
        check=False,
    )
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr[-2000:] + quiet.stderr[-2000:]
    if not _noise(loud.stderr):
        pytest.skip("this TensorFlow build prints nothing at start-up even when verbose; nothing to hide")
    assert _noise(quiet.stderr) == [], quiet.stderr


def test_bench_loads_the_model_without_tensorflow_noise(tmp_path: Path) -> None:
    out = _drs("bench", "--pods", "10", "--seeds", "1", "--out", str(tmp_path / "bench"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "drs " in out.stdout, "the table has the learned policy's row (so the model was loaded)"
    assert _noise(out.stderr) == [], out.stderr[-3000:]
    assert _noise(out.stdout) == []


def test_demo_prints_progress_table_and_paths_only(tmp_path: Path) -> None:
    """`drs-prom demo` prints nothing but the progress bar, the table and the file paths."""
    out = _drs("demo", "--seeds", "1", "--out", str(tmp_path / "demo"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert all(PROGRESS_FRAME.match(frame) for frame in re.split(r"[\r\n]", out.stderr)), out.stderr[-3000:]
    lines = out.stdout.splitlines()
    table_start = next(i for i, line in enumerate(lines) if line.startswith("scenario drs-paper"))
    before, table_and_after = lines[:table_start], lines[table_start:]
    # Before the table: at most the lines naming the model file and which policies run.
    assert len(before) <= 2, before
    assert all(
        re.fullmatch(r"drs is the shipped model \S+ \(\S+\.keras\)", line) or line.startswith("policies: ")
        for line in before
    ), before
    paths = [line for line in table_and_after if line.startswith(("plot: ", "results: "))]
    assert [p.split(": ", 1)[1] for p in paths] == [
        str(tmp_path / "demo" / "bench-drs-paper.png"),
        str(tmp_path / "demo" / "bench-drs-paper.json"),
    ]
    assert all(Path(p.split(": ", 1)[1]).is_file() for p in paths)
    table = [line for line in table_and_after if line not in paths]
    rule = next(i for i, line in enumerate(table) if line.startswith("---"))
    header = " ".join(table[1:rule]).split()  # column titles in full, wrapped over several lines
    assert table[rule - 1].startswith("policy") and "imbalance" in header
    notes = ("lower is better", "composite score = ", "pod slowdown = ")
    assert [line.startswith(n) for line, n in zip(table[-len(notes) :], notes)] == [True] * len(notes)
    rows = table[rule + 1 : -len(notes)]
    assert {row.split()[0] for row in rows} >= {"kube-default", "drs"}
    assert all(re.fullmatch(r"[\w-]+(\s+[\d.,]+ \([\d.]+x\))+", row) for row in rows), rows


def test_export_logs_json_lines_and_serves(tmp_path: Path) -> None:
    """--log-format json: the in-cluster commands log one JSON object per line on stderr."""
    proc = subprocess.Popen(
        [*DRS, "export", "--listen", "127.0.0.1:0", "--node-name", "n-json", "--log-format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_user_env(),
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        entry = json.loads(first)
        assert entry["level"] == "info" and entry["logger"] == "exporters.node_exporter"
        assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", entry["time"])
        url = re.search(r"http://127\.0\.0\.1:\d+/metrics", entry["msg"])
        assert url, entry
        body = wait_for(lambda: _get(url.group(0)), 30, "the exporter's /metrics")
        assert 'nodename="n-json"' in body
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()


def test_log_format_is_validated() -> None:
    out = _drs("export", "--log-format", "xml")
    assert out.returncode == 2
    assert "'xml' is not one of 'text', 'json'" in out.stderr


def _get(url: str) -> str | None:
    try:
        return requests.get(url, timeout=5).text
    except requests.RequestException:
        return None
