"""The ``drs-prom`` command: each subcommand parses flags, builds settings, calls one run().

Heavy imports (TensorFlow, the Kubernetes client) happen inside the subcommand that
needs them so ``drs-prom --help`` and ``drs-prom export`` start fast (the top of the layers:
nothing imports this module but ``python -m drs_prom``).

Over 400 lines because it is a flat list of a dozen click commands and their options; each body is a few lines.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from drs_prom.errors import DrsError
from drs_prom.ops.logs import LOG_FORMATS, configure_logging, quiet_libraries


def _verbose_callback(ctx: click.Context, param: click.Parameter, verbose: bool) -> bool:
    """Runs while flags are parsed, i.e. before a subcommand imports TensorFlow."""
    if verbose:
        ctx.meta["drs_prom.verbose"] = True
    quiet_libraries(bool(ctx.meta.get("drs_prom.verbose")))
    return bool(ctx.meta.get("drs_prom.verbose"))


def _verbose_option(expose: bool = False):
    return click.option(
        "-v",
        "--verbose",
        is_flag=True,
        expose_value=expose,
        is_eager=True,
        callback=_verbose_callback,
        help="Debug logs and the libraries' own start-up output (TensorFlow, absl), hidden otherwise.",
    )


_log_format_option = click.option(
    "--log-format",
    type=click.Choice(LOG_FORMATS),
    default="text",
    show_default=True,
    envvar="DRS_PROM_LOG_FORMAT",
    help="json: one JSON object per log line on stderr (for cluster log shippers).",
)

if TYPE_CHECKING:  # the store (and the agent package it loads) is imported by the model subcommands only
    from drs_prom.policies.contract import Policy
    from drs_prom.sim.bench_command import TraceOptions
    from drs_prom.stores.model_store import ModelStore

F = TypeVar("F", bound=Callable[..., Any])


@click.group(context_settings={"auto_envvar_prefix": "DRS_PROM", "help_option_names": ["-h", "--help"]})
@click.version_option(package_name="drs-prom", message="%(prog)s %(version)s")
@_verbose_option()
def cli() -> None:
    """drs-prom: a Kubernetes scheduler whose policy is a learned Q-network fed by Prometheus metrics.

    The shipped model scores every feasible node with a per-node Q-network trained from demonstrations
    (large-margin imitation of a heuristic teacher on generated clusters); `drs-prom retrain` fine-tunes a copy
    from the cluster's own decision journal and Prometheus history and promotes it only if it passes the gate.

    Library start-up output (TensorFlow, absl, oneDNN) is hidden unless --verbose.
    """


def main() -> None:
    """Entry point: a DrsError becomes one line on stderr and exit code 2, never a traceback."""
    try:
        cli(standalone_mode=True, prog_name="drs-prom")
    except DrsError as exc:
        click.echo(f"drs-prom: error: {exc}", err=True)
        sys.exit(2)


# Subcommands register themselves below; keep this list in sync with the README.
# (Each engineer adds their command with a small `cli.add_command(...)` line.)


@cli.command("export")
@click.option("--listen", default="0.0.0.0:9105", show_default=True, help="host:port to serve /metrics on.")
@click.option(
    "--node-name", envvar="NODE_NAME", default=None, help="nodename label (env NODE_NAME; default: hostname)."
)
@click.option(
    "--net-device-exclude", default=None, help="Regex of network devices to leave out (default: loopback/virtual)."
)
@click.option(
    "--disk-device-exclude", default=None, help="Regex of block devices to leave out (default: virtual/partitions)."
)
@_log_format_option
@_verbose_option(expose=True)
def export_cmd(
    listen: str,
    node_name: str | None,
    net_device_exclude: str | None,
    disk_device_exclude: str | None,
    log_format: str,
    verbose: bool,
) -> None:
    """Serve this node's cpu/memory/network/disk counters with node_exporter's metric names."""
    from exporters import node_exporter as ne

    configure_logging(log_format, verbose)
    ne.serve(
        listen,
        node_name,
        ne.DEFAULT_NET_EXCLUDE if net_device_exclude is None else net_device_exclude,
        ne.DEFAULT_DISK_EXCLUDE if disk_device_exclude is None else disk_device_exclude,
    )


@cli.command("state")
@click.option("--prometheus", "url", default=None, help="Prometheus base URL (default: from config).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option("--window", default=None, help="rate() window, e.g. 30s.")
@click.option("--max-age", type=float, default=None, help="Seconds after which a node's data is stale.")
@click.option("--selector", default=None, help='Extra label matchers, e.g. job="node".')
@click.option("--normalised", is_flag=True, help="Also print the normalised 0..1 matrix the policy reads.")
def state_cmd(
    url: str | None,
    config_path: str | None,
    window: str | None,
    max_age: float | None,
    selector: str | None,
    normalised: bool,
) -> None:
    """Print every node's six features as read from Prometheus now."""
    from drs_prom.config import load_settings
    from drs_prom.signals.prometheus import PrometheusSource
    from drs_prom.signals.state import node_matrix, state_table

    settings = load_settings(
        config_path,
        {
            "prometheus.url": url,
            "prometheus.window": window,
            "prometheus.max_sample_age_seconds": max_age,
            "prometheus.node_selector": selector,
        },
    )
    source = PrometheusSource(settings.prometheus)
    try:
        snap = source.snapshot()
    finally:
        source.close()
    click.echo(state_table(snap))
    if normalised and len(snap.features):
        import pandas as pd

        matrix = pd.DataFrame(
            node_matrix(snap.features, settings.normalisation), index=snap.features.index, columns=snap.features.columns
        )
        click.echo("\nnormalised:\n" + matrix.to_string(float_format=lambda v: f"{v:.3f}", na_rep="-"))


@cli.group("promql")
def promql_group() -> None:
    """Print the PromQL-derived deploy files (recording/alert rules, Grafana dashboard)."""


@promql_group.command("rules")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Settings YAML: the per-pod rules for its usage.cadvisor_selector and usage.rate_window.",
)
def promql_rules(config_path: str | None) -> None:
    """The rules file (deploy/prometheus/rules/drs.rules.yml is the one for the default settings)."""
    from drs_prom.config import load_settings
    from drs_prom.signals import promql

    params = promql.RuleParams.for_settings(load_settings(config_path)) if config_path else promql.RuleParams()
    click.echo(promql.rules_yaml(params), nl=False)


@promql_group.command("dashboard")
def promql_dashboard() -> None:
    """The Grafana dashboard (deploy/prometheus/grafana/drs-nodes.json)."""
    from drs_prom.signals import promql

    click.echo(promql.dashboard_json(), nl=False)


@promql_group.command("queries")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None)
def promql_queries(config_path: str | None) -> None:
    """The six feature queries and the freshness query for the configured settings."""
    from drs_prom.config import load_settings
    from drs_prom.signals.prometheus import PrometheusSource

    src = PrometheusSource(load_settings(config_path).prometheus)
    for name, q in {**src.queries, "last_seen": src.freshness_query}.items():
        click.echo(f"{name}: {q}")


@cli.command("run")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option(
    "--kubeconfig", default=None, envvar="KUBECONFIG", help="Kubeconfig (default: in-cluster, then ~/.kube/config)."
)
@click.option("--scheduler-name", default=None, help="spec.schedulerName to serve (default: drs-scheduler).")
@click.option("--prometheus", "url", default=None, help="Prometheus base URL.")
@click.option("--model", "model_path", default=None, help="Model file (default: the shipped model).")
@click.option("--metrics-listen", default=None, help="host:port for /metrics, /healthz, /readyz.")
@click.option("--no-leader-elect", is_flag=True, help="Bind without holding the Lease (one replica only!).")
@click.option(
    "--policy",
    "policy_name",
    default=None,
    help="Decide with this policy instead of the model: a heuristic (e.g. balanced-load) for comparisons (drs-prom "
    "testbed), or drs+devices (the model behind the device stage, for GPU clusters).",
)
@_log_format_option
@_verbose_option(expose=True)
def run_cmd(
    config_path: str | None,
    kubeconfig: str | None,
    scheduler_name: str | None,
    url: str | None,
    model_path: str | None,
    metrics_listen: str | None,
    no_leader_elect: bool,
    policy_name: str | None,
    log_format: str,
    verbose: bool,
) -> None:
    """Run the scheduler: watch pods for our schedulerName, choose nodes, bind."""
    from drs_prom.config import load_settings
    from drs_prom.scheduler.runner import run_scheduler

    configure_logging(log_format, verbose)
    settings = load_settings(
        config_path,
        {
            "scheduler.scheduler_name": scheduler_name,
            "prometheus.url": url,
            "scheduler.model_path": model_path,
            "scheduler.metrics_listen": metrics_listen,
            "scheduler.leader_election": False if no_leader_elect else None,
        },
    )
    policy: Policy | Literal["load"] = "load"
    if policy_name and policy_name != "drs":
        from drs_prom.registry import PolicySpec, make_policy

        policy = make_policy(policy_name, PolicySpec.from_settings(settings))
    run_scheduler(settings, kubeconfig, policy=policy)


@cli.command("rebalance")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option(
    "--kubeconfig", default=None, envvar="KUBECONFIG", help="Kubeconfig (default: in-cluster, then ~/.kube/config)."
)
@click.option("--prometheus", "url", default=None, help="Prometheus base URL.")
@click.option(
    "--mode",
    type=click.Choice(["dry-run", "evict"]),
    default=None,
    help="dry-run: journal what would move, evict nothing (default: rebalance.mode, dry-run); evict: evict.",
)
@click.option("--metrics-listen", default=None, help="host:port for /metrics, /healthz, /readyz.")
@click.option("--once", is_flag=True, help="Run one round and exit (no /metrics server).")
@_log_format_option
@_verbose_option(expose=True)
def rebalance_cmd(
    config_path: str | None,
    kubeconfig: str | None,
    url: str | None,
    mode: str | None,
    metrics_listen: str | None,
    once: bool,
    log_format: str,
    verbose: bool,
) -> None:
    """Move pods off nodes that stay hot: evict the pod whose move helps most, where its scheduler would place its
    replacement on a clearly better node (PDB-safe, budgeted, dry-run by default)."""
    from drs_prom.config import load_settings
    from drs_prom.rebalance.loop import run_rebalancer

    configure_logging(log_format, verbose)
    settings = load_settings(
        config_path,
        {"prometheus.url": url, "rebalance.mode": mode, "rebalance.metrics_listen": metrics_listen},
    )
    run_rebalancer(settings, kubeconfig, once=once)


@cli.command("extender")
@click.option("--listen", default="0.0.0.0:8888", show_default=True, help="host:port (':8888' = all interfaces).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option("--kubeconfig", default=None, envvar="KUBECONFIG", help="Kubeconfig for the node/pod cache.")
@click.option("--no-cache", is_flag=True, help="Do not watch the cluster (only for nodeCacheCapable: false).")
@click.option("--prometheus", "url", default=None, help="Prometheus base URL.")
@click.option("--model", "model_path", default=None, help="Model file (default: the shipped model).")
@_log_format_option
@_verbose_option(expose=True)
def extender_cmd(
    listen: str,
    config_path: str | None,
    kubeconfig: str | None,
    no_cache: bool,
    url: str | None,
    model_path: str | None,
    log_format: str,
    verbose: bool,
) -> None:
    """Serve kube-scheduler extender verbs (filter, prioritize) with drs-prom's scores."""
    from drs_prom.config import load_settings
    from drs_prom.scheduler.runner import run_extender

    configure_logging(log_format, verbose)
    settings = load_settings(config_path, {"prometheus.url": url, "scheduler.model_path": model_path})
    run_extender(settings, listen, kubeconfig, use_cache=not no_cache)


def _trace_options(command: Callable[..., None]) -> Callable[..., None]:
    """The options of a trace replay, shared by ``bench`` and ``testbed`` (fields of a scenario's ``trace:``)."""
    for option in reversed(_TRACE_OPTIONS):
        command = option(command)
    return command


_TRACE_OPTIONS = [
    click.option(
        "--trace",
        "trace_dir",
        default=None,
        type=click.Path(file_okay=False),
        help="Replay a trace directory (openb or nodes.csv + pods.csv); seeds are sampling seeds. See docs/traces.md.",
    ),
    click.option("--trace-nodes", default=None, type=click.IntRange(1), help="With --trace: sampled nodes [all]."),
    click.option(
        "--trace-window", default="0:1", show_default=True, help="With --trace: START:END fractions of the pod list."
    ),
    click.option("--trace-pod-list", default="openb_pod_list_default.csv", show_default=True, help="openb pod list."),
    click.option("--trace-max-pods", default=None, type=click.IntRange(1), help="With --trace: at most N pods."),
    click.option(
        "--compression",
        default=1.0,
        show_default=True,
        type=click.FloatRange(min=0, min_open=True),
        help="With --trace: every time (arrivals and run times) is divided by this.",
    ),
    click.option(
        "--load-factor",
        default=1.0,
        show_default=True,
        type=click.FloatRange(min=0, min_open=True),
        help="With --trace: arrivals come this many times faster (run times unchanged).",
    ),
    click.option("--usage-cpu", default=0.4, show_default=True, type=float, help="Mean used/requested CPU."),
    click.option("--usage-mem", default=0.6, show_default=True, type=float, help="Mean used/requested memory."),
    click.option("--usage-spread", default=0.3, show_default=True, type=float, help="Std of the ratios."),
]


def _trace(
    trace_dir: str | None,
    nodes: int | None,
    window: str,
    pod_list: str,
    max_pods: int | None,
    compression: float,
    load_factor: float,
) -> TraceOptions | None:
    """The ``--trace*`` options (None without ``--trace``)."""
    from drs_prom.sim.bench_command import TraceOptions

    if trace_dir is None:
        return None
    return TraceOptions(trace_dir, nodes, window, pod_list, max_pods, compression, load_factor)


@cli.command("testbed")
@click.option(
    "--scenario",
    default="drs-paper",
    show_default=True,
    help="Packaged scenario name, generated evaluation cluster (e.g. eval-diurnal-2) or a YAML path.",
)
@click.option("--seeds", default=1, show_default=True, type=click.IntRange(1, 1000), help="Seeds 0..N-1.")
@click.option("--pods", default=None, type=click.IntRange(1), help="Only the first N arrivals of each episode.")
@click.option("--speed", default=10.0, show_default=True, type=float, help="Simulated seconds per wall second.")
@click.option(
    "--schedulers",
    default="kube-scheduler,drs",
    show_default=True,
    help="Comma-separated: kube-scheduler, kube-scheduler+drs (a second kube-scheduler scoring with drs-prom's extender, "
    "the chart's mode kube-scheduler), drs, or a heuristic name (drs-prom run --policy); any of them followed by "
    "+rebalance (drs-prom rebalance beside it) or +descheduler (the real kubernetes-sigs descheduler).",
)
@click.option(
    "--faults",
    is_flag=True,
    help="Run the fault script instead (drs-prom, 2 replicas): pods lost/bound twice, recovery.",
)
@click.option("--nodes-scale", default=None, type=click.IntRange(1), help="Use M fake nodes (node types scaled).")
@click.option(
    "--scrape",
    "scrape_seconds",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Scrape interval (s). Default: 0.5, longer for clusters whose pages one process cannot serve that often "
    "(0.01 s per node in 0.5 s steps: 1 s at 89 nodes).",
)
@click.option("--model", "model_path", default=None, help="Model for drs (default: the shipped one).")
@click.option("--no-bench", is_flag=True, help="Skip the in-process bench comparison.")
@click.option(
    "--kubeconfig",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="Run on this cluster instead of starting etcd + kube-apiserver: fake nodes (tainted drs.io/testbed, "
    "Lease heartbeats) and one namespace per run are created there and deleted at the end.",
)
@click.option(
    "--build",
    "build_bins",
    is_flag=True,
    help="First build kube-apiserver, kube-scheduler, kubectl and etcd from the recipe shipped in the package "
    "(Go >= 1.25 on PATH; 10-20 min once, then a no-op), unless --kubeconfig names a cluster.",
)
@click.option("--out", "out_dir", default="out/testbed", show_default=True, type=click.Path(file_okay=False))
@click.option(
    "--told-usage",
    is_flag=True,
    help="Annotate every pod with drs.io/demand, its expected usage (as users who annotate do). By default no pod "
    "says its usage: the schedulers estimate it from Prometheus (the twin kubelets' cAdvisor series), and a run fails "
    "if a pod carried a usage annotation.",
)
@_trace_options
def testbed_cmd(
    scenario: str,
    seeds: int,
    pods: int | None,
    speed: float,
    schedulers: str,
    faults: bool,
    nodes_scale: int | None,
    scrape_seconds: float | None,
    model_path: str | None,
    no_bench: bool,
    kubeconfig: str | None,
    build_bins: bool,
    out_dir: str,
    trace_dir: str | None,
    trace_nodes: int | None,
    trace_window: str,
    trace_pod_list: str,
    trace_max_pods: int | None,
    compression: float,
    load_factor: float,
    usage_cpu: float,
    usage_mem: float,
    usage_spread: float,
    told_usage: bool,
) -> None:
    """Closed loop on real parts: control plane, twin kubelets over the simulator, real Prometheus, judged by PromQL.

    ``--trace DIR`` replays a production trace (docs/traces.md): each seed samples its own nodes, so each seed
    gets its own control plane."""
    import logging

    from drs_prom.testbed.api import run_testbed
    from drs_prom.testbed.build import build_binaries
    from drs_prom.testbed.schedulers import parse_schedulers

    if build_bins and kubeconfig is None:
        click.echo(f"binaries ready in {build_binaries()}")

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # retries while a fault has the apiserver down
    trace = _trace(trace_dir, trace_nodes, trace_window, trace_pod_list, trace_max_pods, compression, load_factor)
    if trace is not None:
        trace = replace(trace, usage=(usage_cpu, usage_mem, usage_spread))
    run_testbed(
        scenario if trace is None else trace.scenario(pods),
        list(range(seeds)),
        pods,
        speed,
        parse_schedulers(schedulers),
        out_dir,
        nodes_scale=nodes_scale,
        scrape_seconds=scrape_seconds,
        model_path=model_path,
        faults=faults,
        bench=not no_bench,
        kubeconfig=kubeconfig,
        told_usage=told_usage,
        echo=click.echo,
    )


def _seeds(value: str | int) -> int | None:
    """``--seeds``: a count from 1 to 1000, or 'auto' (None)."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise click.BadParameter(f"{value!r} is neither a count from 1 to 1000 nor 'auto'")
    return int(text)


@cli.command("bench")
@click.option(
    "--scenario",
    default=None,
    help="Packaged scenario name, generated evaluation cluster (e.g. eval-poisson-1) or a YAML path "
    "[default: drs-paper].",
)
@click.option(
    "--suite",
    is_flag=True,
    help="Every packaged scenario (but cluster-500) and the 20 generated evaluation clusters; "
    "composite ranking, paired-seed CIs against the best baseline, a Pareto plot per scenario.",
)
@click.option("--only", default=None, help="With --suite: comma-separated scenario names (a subset).")
@click.option(
    "--jobs", default=1, show_default=True, type=click.IntRange(1, 64), help="With --suite: scenarios in parallel."
)
@click.option(
    "--seeds",
    default="5",
    show_default=True,
    callback=lambda _ctx, _param, value: _seeds(value),
    help="Seeds 0..N-1 (same arrivals for every policy), or 'auto': per scenario, add seeds until the candidate's "
    "paired 95% interval against the best heuristic is within +-2% (at least 10, at most 100).",
)
@click.option(
    "--candidate",
    default="drs",
    show_default=True,
    help="The policy judged against the best heuristic (paired interval, harm and inferior flags).",
)
@click.option(
    "--policies",
    default=None,
    help="Comma-separated (default: all heuristics and teachers, drs, drs-original; with --trace also the GPU "
    "clusters' baselines most-allocated-gpu, best-fit-gpu and fgd).",
)
@click.option(
    "--out",
    "out_dir",
    default="out/bench",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for JSON + PNG.",
)
@click.option(
    "--pods", default=None, type=click.IntRange(1), help="Only the first N arrivals of each episode (quick runs)."
)
@click.option("--model", "model_path", default=None, help="Model for the drs policy (default: the shipped one).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@_trace_options
@click.option(
    "--told-usage",
    is_flag=True,
    help="Tell the policies each pod's expected usage (an oracle: what annotating every pod with drs.io/demand "
    "gives) instead of what a live scheduler can know, the estimate from the stored series (the default).",
)
@click.option(
    "--usage-sweep",
    default=None,
    help="With --trace: comma-separated used/requested levels (CPU and memory); ranks the policies at each.",
)
@click.option(
    "--fill",
    default=None,
    help="With --trace: the FGD paper's protocol instead of a replay: the trace's pods arrive, never ending, until "
    "their requests of --fill-resource reach this share of its capacity (e.g. 1.3); reports the share each policy "
    "allocated, at 100 %% and at the target, and the fragmentation rate.",
)
@click.option(
    "--fill-resource",
    default="nvidia.com/gpu",
    show_default=True,
    help="With --fill: the resource whose requests fill the cluster (an extended resource, cpu or memory).",
)
@click.option(
    "--fill-step", default="0.05", show_default=True, help="With --fill: the allocation curve's step, a share."
)
def bench_cmd(
    scenario: str | None,
    suite: bool,
    only: str | None,
    jobs: int,
    seeds: int | None,
    candidate: str,
    policies: str | None,
    out_dir: str,
    pods: int | None,
    model_path: str | None,
    no_progress: bool,
    trace_dir: str | None,
    trace_nodes: int | None,
    trace_window: str,
    trace_pod_list: str,
    trace_max_pods: int | None,
    compression: float,
    load_factor: float,
    usage_cpu: float,
    usage_mem: float,
    usage_spread: float,
    told_usage: bool,
    usage_sweep: str | None,
    fill: str | None,
    fill_resource: str,
    fill_step: str,
) -> None:
    """Benchmark schedulers on the simulator: composite score, imbalance, utilisation, completion vs kube-default."""
    from drs_prom.sim.bench_command import BenchRequest, run_bench_command

    trace = _trace(trace_dir, trace_nodes, trace_window, trace_pod_list, trace_max_pods, compression, load_factor)
    request = BenchRequest(
        scenario=scenario,
        suite=suite,
        only=only,
        jobs=jobs,
        seeds=seeds,
        candidate=candidate,
        policies=policies,
        out_dir=out_dir,
        pods=pods,
        model_path=model_path,
        progress=not no_progress,
        trace=None if trace is None else replace(trace, usage=(usage_cpu, usage_mem, usage_spread)),
        usage_sweep=usage_sweep,
        information="told" if told_usage else "estimated",
        fill=fill,
        fill_resource=fill_resource,
        fill_step=fill_step,
    )
    run_bench_command(request, click.echo)


@cli.command("check-install")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option(
    "--scheduler",
    "scheduler_url",
    required=True,
    help="Base URL of the scheduler's (or extender's) port, e.g. https://drs-scheduler-metrics.drs-system.svc:10259.",
)
@click.option("--ca-file", default="", help="CA that signed the scheduler's serving certificate.")
@click.option(
    "--insecure-skip-verify", is_flag=True, help="Do not verify the scheduler's certificate (self-signed serving)."
)
@click.option("--prometheus", "url", default=None, help="Prometheus base URL (default: from config).")
def check_install_cmd(
    config_path: str | None, scheduler_url: str, ca_file: str, insecure_skip_verify: bool, url: str | None
) -> None:
    """Check an install (what `helm test` runs): the scheduler's /readyz, and Prometheus has drs-prom's recorded
    node series. One line per check; exit 1 when any fails."""
    from drs_prom.config import load_settings
    from drs_prom.ops.install_check import check_install

    settings = load_settings(config_path, {"prometheus.url": url})
    checks = check_install(settings.prometheus, scheduler_url, ca_file, insecure_skip_verify)
    for c in checks:
        click.echo(c.line())
    sys.exit(0 if all(c.ok for c in checks) else 1)


@cli.command("demo")
@click.option("--seeds", default=5, show_default=True, type=click.IntRange(1, 1000))
@click.option("--out", "out_dir", default="out/demo", show_default=True, type=click.Path(file_okay=False))
@click.option("--no-progress", is_flag=True)
def demo_cmd(seeds: int, out_dir: str, no_progress: bool) -> None:
    """The main job: benchmark the shipped model against the heuristics on DRS's scenario (simulated)."""
    from drs_prom.sim.bench import demo

    demo(seeds=seeds, out_dir=out_dir, progress=not no_progress, echo=click.echo)


# -- retraining and the model store ---------------------------------------------------------


@cli.command("retrain")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option("--once", is_flag=True, help="One run now, then exit (exit 1 when the run failed, e.g. Prometheus down).")
@click.option("--prometheus", "url", default=None, help="Prometheus base URL (default: from config).")
@click.option("--journal", "journal_path", default=None, help="Decision journal (default: scheduler.journal_path).")
@click.option("--store", "store_path", default=None, help="Model store directory (default: retrain.model_store).")
@click.option("--metrics-listen", default="", help="host:port for /metrics in the long-running mode (empty: none).")
@click.option("--json", "as_json", is_flag=True, help="With --once: print the result as JSON.")
@_log_format_option
@_verbose_option(expose=True)
def retrain_cmd(
    config_path: str | None,
    once: bool,
    url: str | None,
    journal_path: str | None,
    store_path: str | None,
    metrics_listen: str,
    as_json: bool,
    log_format: str,
    verbose: bool,
) -> None:
    """Retrain the policy from the journal and Prometheus history; gate and promote it (needs drs-prom[train])."""
    import json
    import signal
    import threading
    from dataclasses import asdict

    from drs_prom.config import load_settings
    from drs_prom.extras import require_train

    require_train("drs-prom retrain")

    settings = load_settings(
        config_path, {"prometheus.url": url, "scheduler.journal_path": journal_path, "retrain.model_store": store_path}
    )
    configure_logging(log_format, verbose)
    from drs_prom.ops.retrain_job import build_run, make_trigger, run_forever

    if once:
        res = build_run(settings)()
        click.echo(json.dumps(asdict(res), default=str, sort_keys=True) if as_json else res.summary())
        sys.exit(1 if res.result == "error" else 0)
    make_trigger(settings.retrain)  # invalid cron -> ConfigError before anything starts
    if metrics_listen:
        from prometheus_client import start_http_server

        host, _, port = metrics_listen.rpartition(":")
        start_http_server(int(port), addr=host or "0.0.0.0")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_forever(settings, stop=stop)


@cli.group("model")
def model_group() -> None:
    """Versions in the model store: list, current, rollback."""


def _store(config_path: str | None, store_path: str | None) -> ModelStore:
    from drs_prom.config import load_settings
    from drs_prom.stores.model_store import ModelStore

    settings = load_settings(config_path, {"retrain.model_store": store_path})
    return ModelStore(settings.retrain.model_store, settings.retrain.keep_versions)


_store_options = [
    click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML."),
    click.option("--store", "store_path", default=None, help="Model store directory (default: retrain.model_store)."),
]


def _with_store_options(fn: F) -> F:
    for opt in reversed(_store_options):
        fn = opt(fn)
    return fn


@model_group.command("list")
@_with_store_options
def model_list(config_path: str | None, store_path: str | None) -> None:
    """Every stored version, oldest first; '*' marks the current one."""
    store = _store(config_path, store_path)
    current = store.current()
    versions = store.list()
    if not versions:
        click.echo(f"no model versions in {store.root}")
        return
    for v in versions:
        scores = v.meta.get("scores") or {}
        sc = " ".join(f"{b}={s.get('candidate', float('nan')):.4g}" for b, s in scores.items())
        click.echo(
            f"{'*' if v.name == current else ' '} {v.name}  {v.status:<9} transitions={v.meta.get('transitions', '-')} {sc}"
        )


@model_group.command("current")
@_with_store_options
def model_current(config_path: str | None, store_path: str | None) -> None:
    """The promoted version and its directory."""
    from drs_prom.errors import ModelError

    store = _store(config_path, store_path)
    name = store.current()
    if name is None:
        raise ModelError(f"no model promoted yet in {store.root}")
    click.echo(f"{name} {store.current_path()}")


@model_group.command("rollback")
@click.argument("version", required=False)
@_with_store_options
def model_rollback(version: str | None, config_path: str | None, store_path: str | None) -> None:
    """Make VERSION (default: the one promoted before the current) current again."""
    store = _store(config_path, store_path)
    before = store.current()
    now = store.rollback(version)
    click.echo(f"current: {now} (was {before})")


@cli.command("report")
@click.option("--since", default="6h", show_default=True, help="Period to report, ending now (Prometheus duration).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML.")
@click.option("--journal", "journal_path", default=None, help="Decision journal (default: scheduler.journal_path).")
@click.option("--prometheus", "prom_url", default=None, help="Prometheus URL (default: prometheus.url).")
@click.option(
    "--store", "store_path", default=None, help="Model store for promotion markers (default: retrain.model_store)."
)
@click.option(
    "--out", "out_dir", default="drs-report", show_default=True, help="Directory for index.html and the PNGs."
)
@click.option("--no-prometheus", is_flag=True, help="Journal only (no cluster plot).")
def report_cmd(
    since: str,
    config_path: str | None,
    journal_path: str | None,
    prom_url: str | None,
    store_path: str | None,
    out_dir: str,
    no_prometheus: bool,
) -> None:
    """HTML report of the rollout: decisions per arm, agreement, imbalance/hot nodes with
    promotion, rollback and guardrail markers, fallback reasons."""
    from drs_prom.config import load_settings
    from drs_prom.ops.cluster_report import report_since

    settings = load_settings(
        config_path,
        {"scheduler.journal_path": journal_path, "prometheus.url": prom_url, "retrain.model_store": store_path},
    )
    page, data = report_since(settings, since, out_dir, with_prometheus=not no_prometheus)
    click.echo(f"wrote {page} ({len(data.decisions)} decisions, {len(data.events)} rollout events)")
    if data.prometheus_error:
        click.echo(f"warning: no cluster plot: {data.prometheus_error}", err=True)


@cli.command("sim-serve")
@click.option(
    "--scenario",
    default="drs-paper",
    show_default=True,
    help="Packaged scenario name, generated evaluation cluster (e.g. eval-diurnal-2) or a YAML path.",
)
@click.option("--policy", default="kube-default", show_default=True, help="Policy that places the episode's pods.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--speed",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.01),
    help="Simulated seconds per wall second.",
)
@click.option(
    "--mode",
    type=click.Choice(["ports", "paths"]),
    default="ports",
    show_default=True,
    help="One port per node, or one port with /nodes/<name>/metrics.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="First port (0 = any free).")
def sim_serve_cmd(scenario: str, policy: str, seed: int, speed: float, mode: str, host: str, port: int) -> None:
    """Serve a simulated cluster's node metrics (node_exporter format) for a real Prometheus to scrape."""
    from drs_prom.sim.env import sim_policy
    from drs_prom.sim.live_cluster import serve_scenario
    from drs_prom.sim.scenario import load_scenario

    sc = load_scenario(scenario)
    serve_scenario(
        sc,
        sim_policy(policy, sc, seed),
        seed=seed,
        speed=speed,
        mode=mode,  # type: ignore[arg-type]
        host=host,
        port=port,
        echo=click.echo,
    )


# -- training the learned policies ---------------------------------------------------------------


@cli.command("train")
@click.option(
    "--scenario", default="drs-paper", show_default=True, help="Simulator scenario to train on (name or YAML path)."
)
@click.option(
    "--episodes",
    default=60,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Episodes (one workload of the scenario each).",
)
@click.option(
    "--out",
    "out_path",
    default="models/drs-v7.keras",
    show_default=True,
    help="Model path (.keras; .json and .png written beside it).",
)
@click.option("--policy", type=click.Choice(["drs", "drs-original"]), default="drs", show_default=True)
@click.option(
    "--seed", default=0, show_default=True, type=int, help="Seeds weights, exploration and the training workloads."
)
@click.option(
    "--imitate",
    default=None,
    help="drs: warm-start from this heuristic before RL (default balanced-load; 'none' for pure RL).",
)
@click.option(
    "--drs-scales", is_flag=True, help="drs-original: train on DRS's own 0..100 scales (Normalisation.drs_paper())."
)
@click.option(
    "--bench-seeds",
    default=5,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Benchmark seeds recorded in the JSON (0: none).",
)
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False), default=None, help="Settings YAML (reward weights)."
)
@click.option(
    "--learner",
    type=click.Choice(["dqn", "guided"]),
    default="dqn",
    show_default=True,
    help="drs: 'guided' the heuristic-guided per-node network of the shipped drs-v7, imitating per generated "
    "cluster its best heuristic (--clusters; --scenario and --episodes are ignored); 'dqn' the per-node Double DQN "
    "on --scenario (drs-v1, drs-original, retraining).",
)
@click.option(
    "--clusters",
    default=48,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="guided: generated training clusters.",
)
@click.option(
    "--train-load",
    default="0.4,0.9",
    show_default=True,
    help="guided: LO,HI bottleneck utilisation of the generated training and selection clusters (1.0 and above: "
    "overloaded periods).",
)
@click.option(
    "--metric-windows",
    default="1,5,15,30",
    show_default=True,
    help="guided: comma-separated metric lags (s) of the generated clusters.",
)
@click.option(
    "--label-arms",
    default="",
    help="guided: comma-separated heuristics run on every training cluster; a cluster imitates the best of them "
    "where it beats capacity-balanced-overload by more than 2% (default: every cluster imitates it).",
)
@click.option("--dagger", default=0, show_default=True, type=click.IntRange(0, 10), help="guided: DAgger rounds.")
@click.option("--no-progress", is_flag=True)
def train_cmd(
    scenario: str,
    episodes: int,
    out_path: str,
    policy: str,
    seed: int,
    imitate: str | None,
    drs_scales: bool,
    bench_seeds: int,
    config_path: str | None,
    learner: str,
    clusters: int,
    train_load: str,
    metric_windows: str,
    label_arms: str,
    dagger: int,
    no_progress: bool,
) -> None:
    """Train drs (or DRS's original DQN) on the simulator; writes .keras + .json + learning-curve .png (needs drs-prom[train])."""
    import shlex

    from drs_prom.config import load_settings
    from drs_prom.errors import ConfigError
    from drs_prom.extras import require_train

    require_train("drs-prom train")
    from drs_prom.training.episodes import TrainConfig
    from drs_prom.training.train_run import run

    if not out_path.endswith(".keras"):
        raise ConfigError(f"--out must end in .keras: {out_path}")
    command = "drs-prom train " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    if learner != "dqn" and policy != "drs":
        raise ConfigError(f"--learner {learner} applies to --policy drs only")
    if learner == "guided":
        from drs_prom.training.guided_options import guided_config
        from drs_prom.training.guided_run import run_guided_training

        run_guided_training(
            out_path,
            guided_config(clusters, seed, train_load, metric_windows, label_arms, dagger),
            command,
            click.echo,
        )
        return
    if imitate and imitate != "none" and policy != "drs":
        raise ConfigError("--imitate applies to --policy drs only")
    if imitate is None:
        imitate = "balanced-load" if policy == "drs" else ""
    imitate = "" if imitate == "none" else imitate
    settings = load_settings(config_path)
    extra = {"imitate": imitate, "eps_start": 0.3} if imitate else {}
    cfg = TrainConfig(
        policy=policy,
        episodes=episodes,
        seed=seed,
        scenario=scenario,
        reward=settings.reward,
        objectives=settings.objectives,
        recent_window_seconds=settings.prometheus.window_seconds,
        **extra,  # type: ignore[arg-type]
    )
    run(
        cfg,
        out_path,
        drs_scales=drs_scales,
        bench_seeds=bench_seeds,
        progress=not no_progress,
        command=command,
        echo=click.echo,
    )


def _add_verbose(group: click.Group) -> None:
    """Give every other command -v/--verbose too, so ``drs-prom bench -v`` works like ``drs-prom -v bench``."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _add_verbose(command)
        if not any(p.name == "verbose" for p in command.params):
            _verbose_option()(command)


_add_verbose(cli)

if __name__ == "__main__":  # python -m drs_prom.cli (tests run it with the suite's interpreter)
    main()
