"""Readers of production traces into one neutral table: the Alibaba GPU trace 2023 (openb) and a generic CSV.

Both become a ``TraceTable``: nodes (capacity, GPUs, labels, taints) and pods (arrival,
end or none, requests, GPUs, allowed GPU models, optional usage, outcome). Sampling,
windows and drawing happen later (drs_prom.sim.trace_sample); here a file is only read and
checked, and every problem is one line naming the file, the row and the column.

Generic CSV (a directory with ``nodes.csv`` and ``pods.csv``; docs/traces.md has examples):

- nodes.csv: ``name, cpu, memory`` and optionally ``gpu, labels, taints``; cpu in cores or
  a quantity (``32``, ``32000m``), memory a quantity (``256Gi``), labels ``k=v;k2=v2``,
  taints ``key=value:Effect;...``.
- pods.csv: ``name, arrival, cpu, memory`` and ``duration`` or ``end`` (seconds; empty =
  still running at the trace's end), optionally ``gpu, gpu_models (A|B), node_selector,
  tolerations (key=value:Effect or key:Exists), status (Succeeded|Failed|Running|Pending),
  cpu_used, memory_used`` (mean usage; cores and a quantity), ``cpu_used_series,
  memory_used_series`` (usage over the pod's run: ``offset:value;...``, offsets in seconds
  since the pod started, each value holding until the next offset).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from drs_prom.errors import ConfigError
from drs_prom.sim.scenario import parse_quantity

OPENB_NODES = "openb_node_list_all_node.csv"
CSV_NODES, CSV_PODS = "nodes.csv", "pods.csv"
MIB = 2**20

OUTCOMES = ("done", "failed", "pending", "running")
"""A pod's outcome in the trace: ended (deleted or succeeded), failed, never scheduled, still running at the end."""


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_m: int
    mem_bytes: int
    gpus: int
    labels: tuple[tuple[str, str], ...]
    taints: tuple[tuple[str, str, str], ...]  # key, value, effect

    @property
    def kind(self) -> tuple[object, ...]:
        """The stratum of a node: everything that makes two nodes interchangeable for placement."""
        return (self.cpu_m, self.mem_bytes, self.gpus, self.labels, self.taints)


@dataclass(frozen=True)
class TracePod:
    name: str
    arrival: float  # seconds, the trace's clock
    start: float  # when it began to run (arrival when the trace does not say); nan if never
    end: float  # nan: still running when the trace ends
    outcome: str  # one of OUTCOMES
    cpu_m: int
    mem_bytes: int
    gpus: float  # may be fractional in the trace (GPU sharing); replay decides
    gpu_models: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[tuple[str, str, str, str], ...] = ()
    cpu_used: float = math.nan  # cores
    mem_used: float = math.nan  # bytes
    cpu_series: tuple[tuple[float, float], ...] = ()  # (seconds since the pod started, cores), offsets increasing
    mem_series: tuple[tuple[float, float], ...] = ()  # (seconds since the pod started, bytes)


@dataclass(frozen=True)
class TraceTable:
    source: str
    nodes: tuple[TraceNode, ...]
    pods: tuple[TracePod, ...]
    end: float  # the trace's last timestamp


def detect_format(directory: Path) -> str:
    if (directory / OPENB_NODES).is_file():
        return "openb"
    if (directory / CSV_NODES).is_file() and (directory / CSV_PODS).is_file():
        return "csv"
    raise ConfigError(f"trace {directory}: found neither {OPENB_NODES} (openb) nor {CSV_NODES} + {CSV_PODS} (csv)")


def read_trace(directory: str | Path, fmt: str = "auto", pod_list: str = "openb_pod_list_default.csv") -> TraceTable:
    """Read a trace directory; ConfigError (one line) when a file is missing or a row is malformed."""
    root = Path(directory)
    if not root.is_dir():
        raise ConfigError(f"trace directory {root} does not exist")
    fmt = detect_format(root) if fmt == "auto" else fmt
    if fmt == "openb":
        return read_openb(root, pod_list)
    if fmt == "csv":
        return read_csv_trace(root)
    raise ConfigError(f"unknown trace format {fmt!r}; known: openb, csv")


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise ConfigError(f"cannot read trace file {path}: {exc.strerror}") from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path}: missing column(s) {', '.join(missing)}")
        for i, row in enumerate(reader, start=2):
            yield i, {k: (v or "").strip() for k, v in row.items() if k is not None}


def _num(path: Path, line: int, row: dict[str, str], col: str, default: float | None = None) -> float:
    text = row.get(col, "")
    if text == "" or text.lower() == "nan":
        if default is None:
            raise ConfigError(f"{path}:{line}: column {col} is empty")
        return default
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{path}:{line}: column {col} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{path}:{line}: column {col} must be a finite number >= 0, got {text!r}")
    return value


def _qty(path: Path, line: int, row: dict[str, str], col: str, default: float | None = None) -> float:
    text = row.get(col, "")
    if text == "":
        if default is None:
            raise ConfigError(f"{path}:{line}: column {col} is empty")
        return default
    try:
        value = parse_quantity(text)
    except ValueError as exc:
        raise ConfigError(f"{path}:{line}: column {col}: {exc}") from None
    if value < 0:
        raise ConfigError(f"{path}:{line}: column {col} must not be negative")
    return value


def read_openb(root: Path, pod_list: str) -> TraceTable:
    """openb: nodes ``sn,cpu_milli,memory_mib,gpu,model``; pods ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,
    gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`` (gpu_spec, qos and times optional)."""
    npath = root / OPENB_NODES
    nodes = []
    for line, row in _rows(npath, ("sn", "cpu_milli", "memory_mib", "gpu")):
        gpus = int(_num(npath, line, row, "gpu", 0))
        model = row.get("model", "")
        model = "" if model.lower() == "nan" else model
        labels = (("gpu-model", model),) if gpus and model else ()
        nodes.append(
            TraceNode(
                name=row["sn"],
                cpu_m=int(_num(npath, line, row, "cpu_milli")),
                mem_bytes=int(_num(npath, line, row, "memory_mib")) * MIB,
                gpus=gpus,
                labels=labels,
                taints=(),
            )
        )
    ppath = root / pod_list
    pods = []
    for line, row in _rows(ppath, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        phase = row.get("pod_phase", "") or "Succeeded"
        arrival = _num(ppath, line, row, "creation_time", 0.0)
        scheduled = _num(ppath, line, row, "scheduled_time", math.nan)
        deleted = _num(ppath, line, row, "deletion_time", math.nan)
        num_gpu = _num(ppath, line, row, "num_gpu", 0)
        milli = _num(ppath, line, row, "gpu_milli", 0)
        share = milli / 1000.0 if num_gpu == 1 and 0 < milli < 1000 else num_gpu
        spec = row.get("gpu_spec", "")
        models = tuple(sorted({m for m in spec.split("|") if m and m.lower() != "nan"}))
        outcome = {"Failed": "failed", "Pending": "pending", "Running": "live"}.get(phase, "done")
        if phase not in ("Succeeded", "Running", "Failed", "Pending"):
            raise ConfigError(f"{ppath}:{line}: unknown pod_phase {phase!r} (Succeeded, Running, Failed, Pending)")
        pods.append(
            TracePod(
                name=row["name"],
                arrival=arrival,
                start=arrival if math.isnan(scheduled) else scheduled,
                end=deleted,
                outcome=outcome,
                cpu_m=int(_num(ppath, line, row, "cpu_milli")),
                mem_bytes=int(_num(ppath, line, row, "memory_mib")) * MIB,
                gpus=share,
                gpu_models=models,
            )
        )
    if not pods:
        raise ConfigError(f"{ppath}: no pods")
    end = max((p.end for p in pods if not math.isnan(p.end)), default=max(p.arrival for p in pods))
    # openb writes the collection end as the deletion time of pods still running then
    # (a Running pod deleted before that was deleted while running: its lifetime is known)
    pods = [_censored(p) if p.outcome == "live" and (math.isnan(p.end) or p.end >= end) else _done(p) for p in pods]
    return TraceTable(str(root), tuple(nodes), tuple(pods), end)


def _censored(pod: TracePod) -> TracePod:
    return TracePod(**{**pod.__dict__, "end": math.nan, "outcome": "running"})


def _done(pod: TracePod) -> TracePod:
    return TracePod(**{**pod.__dict__, "outcome": "done"}) if pod.outcome == "live" else pod


def _pairs(path: Path, line: int, text: str, col: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in filter(None, (x.strip() for x in text.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{path}:{line}: column {col}: {item!r} is not key=value")
        out.append((key.strip(), value.strip()))
    return tuple(out)


EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _taints(path: Path, line: int, text: str) -> tuple[tuple[str, str, str], ...]:
    out = []
    for item in filter(None, (x.strip() for x in text.split(";"))):
        kv, _, effect = item.rpartition(":")
        key, _, value = kv.partition("=")
        if not key or effect not in EFFECTS:
            raise ConfigError(f"{path}:{line}: column taints: {item!r} is not key=value:Effect ({', '.join(EFFECTS)})")
        out.append((key, value, effect))
    return tuple(out)


def _tolerations(path: Path, line: int, text: str) -> tuple[tuple[str, str, str, str], ...]:
    out = []
    for item in filter(None, (x.strip() for x in text.split(";"))):
        head, _, effect = item.partition(":")
        if effect not in ("", *EFFECTS, "Exists"):
            raise ConfigError(f"{path}:{line}: column tolerations: {item!r} has unknown effect {effect!r}")
        if effect == "Exists":  # key:Exists
            out.append((head, "Exists", "", ""))
            continue
        key, sep, value = head.partition("=")
        out.append((key, "Equal" if sep else "Exists", value, effect))
    return tuple(out)


def _series(path: Path, line: int, row: dict[str, str], col: str) -> tuple[tuple[float, float], ...]:
    """``offset:value;...`` (seconds since the pod started, a quantity), offsets strictly increasing."""
    out: list[tuple[float, float]] = []
    for item in filter(None, (x.strip() for x in row.get(col, "").split(";"))):
        offset, sep, value = item.partition(":")
        try:
            t, v = float(offset), parse_quantity(value.strip())
        except ValueError:
            t = v = math.nan
        if not sep or not math.isfinite(t) or t < 0 or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{path}:{line}: column {col}: {item!r} is not offset:value (seconds >= 0, a quantity)")
        if out and t <= out[-1][0]:
            raise ConfigError(f"{path}:{line}: column {col}: offsets must increase ({t:g} after {out[-1][0]:g})")
        out.append((t, v))
    return tuple(out)


def read_csv_trace(root: Path) -> TraceTable:
    """The generic format (see the module docstring)."""
    npath, ppath = root / CSV_NODES, root / CSV_PODS
    nodes = []
    for line, row in _rows(npath, ("name", "cpu", "memory")):
        labels = _pairs(npath, line, row.get("labels", ""), "labels")
        nodes.append(
            TraceNode(
                name=row["name"],
                cpu_m=round(_qty(npath, line, row, "cpu") * 1000),
                mem_bytes=int(_qty(npath, line, row, "memory")),
                gpus=int(_num(npath, line, row, "gpu", 0)),
                labels=labels,
                taints=_taints(npath, line, row.get("taints", "")),
            )
        )
    if not nodes:
        raise ConfigError(f"{npath}: no nodes")
    pods = []
    for line, row in _rows(ppath, ("name", "arrival", "cpu", "memory")):
        if "duration" not in row and "end" not in row:
            raise ConfigError(f"{ppath}: needs a duration or an end column")
        arrival = _num(ppath, line, row, "arrival")
        if row.get("duration", ""):
            end = arrival + _num(ppath, line, row, "duration")
        else:
            end = _num(ppath, line, row, "end", math.nan)
        if end < arrival:
            raise ConfigError(f"{ppath}:{line}: ends before it arrives")
        status = row.get("status", "") or ("Running" if math.isnan(end) else "Succeeded")
        outcome = {"Succeeded": "done", "Failed": "failed", "Pending": "pending", "Running": "running"}.get(status)
        if outcome is None:
            raise ConfigError(f"{ppath}:{line}: unknown status {status!r} (Succeeded, Failed, Running, Pending)")
        if outcome == "running" and not math.isnan(end):
            outcome = "done"  # deleted while running
        if outcome in ("done", "failed") and math.isnan(end):
            raise ConfigError(f"{ppath}:{line}: status {status} needs a duration or an end")
        models = tuple(sorted({m.strip() for m in row.get("gpu_models", "").split("|") if m.strip()}))
        pods.append(
            TracePod(
                name=row["name"],
                arrival=arrival,
                start=arrival,
                end=end,
                outcome=outcome,
                cpu_m=round(_qty(ppath, line, row, "cpu") * 1000),
                mem_bytes=int(_qty(ppath, line, row, "memory")),
                gpus=_num(ppath, line, row, "gpu", 0),
                gpu_models=models,
                node_selector=_pairs(ppath, line, row.get("node_selector", ""), "node_selector"),
                tolerations=_tolerations(ppath, line, row.get("tolerations", "")),
                cpu_used=_qty(ppath, line, row, "cpu_used", math.nan),
                mem_used=_qty(ppath, line, row, "memory_used", math.nan),
                cpu_series=_series(ppath, line, row, "cpu_used_series"),
                mem_series=_series(ppath, line, row, "memory_used_series"),
            )
        )
    if not pods:
        raise ConfigError(f"{ppath}: no pods")
    ends = [p.end for p in pods if not math.isnan(p.end)]
    return TraceTable(str(root), tuple(nodes), tuple(pods), max([*ends, *(p.arrival for p in pods)]))
