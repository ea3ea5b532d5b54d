"""``drs-prom bench``'s modes as one call: a scenario, the suite, a trace replay or a trace's fill, from the options.

The command line (drs_prom.cli) parses the options into a ``BenchRequest`` and prints what ``run_bench_command``
says through ``echo``; which mode runs, what it checks of the options and what it writes are decided here, in the
package that owns the benchmark.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drs_prom.errors import ConfigError
from drs_prom.registry import DEVICE_HEURISTICS, HEURISTICS
from drs_prom.sim.bench import format_table, model_builder, parse_policies, shipped_model, write_report
from drs_prom.sim.env import ESTIMATED
from drs_prom.sim.fill import run_fills
from drs_prom.sim.fill_report import FillReport, format_fill, write_fill
from drs_prom.sim.fill_sequence import FillSpec
from drs_prom.sim.generator import resolve_scenario
from drs_prom.sim.scenario import Scenario
from drs_prom.sim.suite import format_scenario, format_suite, run_suite, suite_names, summarise, write_suite
from drs_prom.sim.trace_bench import format_sweep, run_trace_bench
from drs_prom.sim.trace_bench import usage_sweep as sweep
from drs_prom.sim.verdicts import judge, judgement_line, run_judged

Echo = Callable[[str], None]


@dataclass(frozen=True)
class TraceOptions:
    """The ``--trace*`` options of ``bench`` and ``testbed``: which trace to replay and how (docs/traces.md)."""

    path: str
    nodes: int | None = None
    window: str = "0:1"
    pod_list: str = "openb_pod_list_default.csv"
    max_pods: int | None = None
    compression: float = 1.0
    load_factor: float = 1.0
    usage: tuple[float, float, float] = (0.4, 0.6, 0.3)

    def section(self, max_pods: int | None = None) -> dict[str, Any]:
        """A scenario's ``trace:`` section (validated with the scenario); ``max_pods`` when the option gives none."""
        return {
            "path": self.path,
            "pod_list": self.pod_list,
            "nodes": self.nodes,
            "window": fractions(self.window),
            "max_pods": self.max_pods or max_pods,
            "compression": self.compression,
            "load_factor": self.load_factor,
            "usage": {"cpu_ratio": self.usage[0], "mem_ratio": self.usage[1], "spread": self.usage[2]},
        }

    def scenario(self, max_pods: int | None = None) -> Scenario:
        return trace_scenario({"name": "trace", "trace": self.section(max_pods)})


def fractions(text: str) -> tuple[float, float]:
    """``--trace-window START:END``, two fractions of the pod list."""
    try:
        a, b = (float(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"--trace-window {text!r} is not START:END (fractions, e.g. 0.2:0.4)") from None
    return a, b


def trace_scenario(data: dict[str, Any]) -> Scenario:
    """A trace scenario validated from its data; a bad option is one line, not pydantic's report."""
    try:
        return Scenario.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise ConfigError(f"invalid trace options: {' '.join(first[1:3]).strip()}") from None


@dataclass(frozen=True)
class BenchRequest:
    """What ``drs-prom bench`` was asked: the options, checked against each other by ``run_bench_command``."""

    scenario: str | None = None
    suite: bool = False
    only: str | None = None
    jobs: int = 1
    seeds: int | None = 5
    """A count of seeds, 0..N-1; None: ``auto`` (per scenario, until the candidate's interval is narrow)."""
    candidate: str = "drs"
    policies: str | None = None
    out_dir: str = "out/bench"
    pods: int | None = None
    model_path: str | None = None
    progress: bool = True
    trace: TraceOptions | None = None
    usage_sweep: str | None = None
    information: str = ESTIMATED
    """What the policies are told of each pod's usage (sim.env.INFORMATION): the stored series' estimate, or the
    workload's expected usage with ``--told-usage``."""
    fill: str | None = None
    """``--fill SHARE``: the FGD paper's protocol on the trace (drs_prom.sim.fill) instead of a replay."""
    fill_resource: str = "nvidia.com/gpu"
    fill_step: str = "0.05"


def trace_policies(text: str | None) -> list[str]:
    """``--policies`` of a trace's replay or fill: the names given, or the default list with the GPU clusters'
    baselines (registry.DEVICE_HEURISTICS) after the field's heuristics."""
    names = parse_policies(text)
    if text:
        return names
    at = max(names.index(h) for h in HEURISTICS) + 1
    return [*names[:at], *(d for d in DEVICE_HEURISTICS if d not in names), *names[at:]]


def run_bench_command(request: BenchRequest, echo: Echo) -> None:
    """Run the mode ``request`` asks for, print its tables through ``echo`` and write its files."""
    r = request
    names_run = parse_policies(r.policies)
    if r.candidate not in names_run and not r.policies:  # the default list gains the candidate (a known name)
        names_run = parse_policies(",".join([*names_run, r.candidate]))
    seed_list = None if r.seeds is None else list(range(r.seeds))
    if "drs" in names_run:
        echo(f"drs is the model {Path(r.model_path).stem} ({r.model_path})" if r.model_path else shipped_model()[1])
    if r.fill is not None:
        _fill(r, echo)
        return
    if r.trace is not None:
        if r.scenario or r.suite:
            raise ConfigError("--trace builds its own scenario; give either --trace or --scenario/--suite")
        _trace_bench(r.trace.scenario(r.pods), r, trace_policies(r.policies), echo)
        return
    if r.suite:
        if r.scenario:
            raise ConfigError("--suite runs its own scenarios; use --only to pick some, not --scenario")
        names = suite_names([n.strip() for n in r.only.split(",") if n.strip()] if r.only else None)
        result = run_suite(
            names,
            seed_list,
            names_run,
            r.model_path,
            jobs=r.jobs,
            pods=r.pods,
            echo=echo if r.progress else None,
            partial_dir=Path(r.out_dir) / "scenarios",
            candidate=r.candidate,
            information=r.information,
        )
        path = write_suite(result, r.out_dir)
        echo(format_suite(result))
        echo(f"wrote {path} and pareto-<scenario>.png ({result.wall_seconds:.1f} s)")
        return
    if r.only:
        raise ConfigError("--only needs --suite")
    sc = resolve_scenario(r.scenario or "drs-paper")
    if sc.trace is not None:
        data = sc.model_dump(exclude_none=True)
        if r.pods:
            data["trace"]["max_pods"] = r.pods
        _trace_bench(trace_scenario(data), r, trace_policies(r.policies), echo)
        return
    if r.usage_sweep:
        raise ConfigError("--usage-sweep needs a trace (--trace or a scenario with a trace: section)")
    if r.pods:
        sc = sc.truncated(r.pods)
    report = run_judged(
        sc,
        seed_list,
        names_run,
        model_builder(r.model_path),
        candidate=r.candidate,
        progress=r.progress,
        note=echo if r.progress else None,
        information=r.information,
    )
    json_path, png_path = write_report(report, r.out_dir)
    echo(format_table(report))
    judged = judge(report, r.candidate)
    if judged is not None:
        echo(judgement_line(judged))
    echo(f"wrote {json_path} and {png_path} ({report.wall_seconds:.1f} s)")


def _trace_bench(sc: Scenario, r: BenchRequest, policies: list[str], echo: Echo) -> None:
    """bench on a trace: every sampling seed, the table and the summary (or, with ``usage_sweep``, the sweep)."""
    if r.seeds is None:
        raise ConfigError("--seeds auto is for scenarios; a trace replay takes a count of sampling seeds (--seeds N)")
    builder = model_builder(r.model_path)
    seeds = list(range(r.seeds))
    if r.usage_sweep:
        try:
            levels = [float(x) for x in r.usage_sweep.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--usage-sweep {r.usage_sweep!r} is not a comma-separated list of numbers") from None
        echo(format_sweep(sweep(sc, levels, seeds, policies, builder, progress=r.progress, information=r.information)))
        return
    report = run_trace_bench(sc, seeds, policies, builder, progress=r.progress, echo=echo, information=r.information)
    json_path, png_path = write_report(report, r.out_dir)
    echo(format_table(report))
    echo(format_scenario(summarise(report).to_json()))
    echo(f"wrote {json_path} and {png_path} ({report.wall_seconds:.1f} s)")


def _share(text: str, option: str) -> float:
    """A share of capacity given on the command line (``1.3``); one line when it is not a number."""
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not a number (a share of capacity, e.g. 1.3)") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{option} {text!r} must be a share of capacity above 0, e.g. 1.3")
    return value


def _fill(r: BenchRequest, echo: Echo) -> None:
    """bench with ``--fill``: the FGD paper's protocol on the trace's cluster, every policy on every seed."""
    assert r.fill is not None
    spec = FillSpec(_share(r.fill, "--fill"), r.fill_resource.strip(), _share(r.fill_step, "--fill-step"))
    if r.suite or r.usage_sweep:
        raise ConfigError("--fill is a protocol of its own; give it with --trace, not with --suite or --usage-sweep")
    if r.seeds is None:
        raise ConfigError("--seeds auto is for scenarios; the fill takes a count of sampling seeds (--seeds N)")
    if r.pods:
        raise ConfigError("--pods does not apply to --fill: its pods arrive until their requests reach --fill")
    if r.trace is not None:
        if r.scenario:
            raise ConfigError("--trace builds its own scenario; give either --trace or --scenario")
        sc = r.trace.scenario()
    elif r.scenario:
        sc = resolve_scenario(r.scenario)
    else:
        raise ConfigError("--fill needs a trace: --trace DIR, or --scenario with a trace: section")
    trace = sc.trace
    if trace is None:
        raise ConfigError(f"--fill needs a trace; scenario {sc.name} has no trace: section")
    if trace.window != (0.0, 1.0) or trace.max_pods or trace.compression != 1.0 or trace.load_factor != 1.0:
        raise ConfigError(
            "--fill draws from the whole pod list and has no time: --trace-window, --trace-max-pods, "
            "--compression and --load-factor do not apply"
        )
    t0 = time.perf_counter()
    seeds = list(range(r.seeds))
    policies = trace_policies(r.policies)
    stats, runs, skipped = run_fills(
        sc, seeds, policies, spec, model_builder(r.model_path), r.information, echo=echo, progress=r.progress
    )
    report = FillReport(sc.name, spec, seeds, stats, runs, skipped, r.information, time.perf_counter() - t0)
    path = write_fill(report, r.out_dir)
    echo(format_fill(report))
    echo(f"wrote {path} ({report.wall_seconds:.1f} s)")
