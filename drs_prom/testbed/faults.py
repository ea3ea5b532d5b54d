"""The fault script: one drs-prom run (2 replicas, leader election) with faults injected on a timeline.

In order, each after the loop has settled from the previous one:

1. ``prometheus_down``: Prometheus SIGKILLed, restarted 30 s later (same port and data dir).
   Recovered when the leader's node state is fresh again (``drs_state_age_seconds``).
2. ``leader_killed``: the replica holding the Lease SIGKILLed. Recovered when the other replica
   leads (``drs_leader`` 1) and a pod created after the kill is bound.
3. ``exporter_down``: one node's exporter stopped for 20 s, then served again. Recovered when
   Prometheus has that node's features again.
4. ``apiserver_restart``: kube-apiserver stopped and started (same etcd, same port). Recovered
   when a pod created after it came back is bound.
5. ``unschedulable_burst``: 10 pods that fit no node (1000 cores each). They must stay unbound;
   recovered when a regular pod created after the burst is bound. Then they are deleted.

For each: ``recovery_seconds`` and the fallback decisions by reason over the fault's window
(PromQL ``increase`` of drs-prom's counters). The run's pods lost / bound twice / bound where
they cannot run are counted by the run itself, over the whole timeline.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from drs_prom.scheduler.write.kube_response import drained
from drs_prom.sim.scenario import Scenario
from drs_prom.testbed.closed_loop import RunContext, Testbed, workload_for
from drs_prom.testbed.schedulers import DRS, DRS_SCHEDULER_NAME

log = logging.getLogger(__name__)

BURST = 10
PROMETHEUS_DOWN_SECONDS = 30.0
EXPORTER_DOWN_SECONDS = 20.0
SETTLE_SECONDS = 8.0
FAULT_WALL_SECONDS = 170.0  # the workload keeps arriving at least this long


def _scrape(url: str) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except Exception:  # noqa: BLE001 - a killed replica simply has no metrics
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                continue
    return out


def _poll(fn: Callable[[], bool], timeout: float, interval: float = 0.1) -> float | None:
    """Seconds until ``fn()`` was true, None if it never was within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if fn():
                return time.monotonic() - t0
        except Exception:  # noqa: BLE001 - what is polled may be down
            pass
        time.sleep(interval)
    return None


def _leader(ctx: RunContext) -> int | None:
    for i, url in enumerate(ctx.sched.metrics_urls):
        if ctx.sched.procs[i].alive() and _scrape(url).get("drs_leader") == 1.0:
            return i
    return None


def _bound_after(ctx: RunContext, t: float) -> bool:
    """Some pod created after epoch ``t`` is bound (seen by the twin kubelet)."""
    created = ctx.driver.result.created
    bound = ctx.kubelet.stats.bound_node
    return any(ts > t and name in bound for name, ts in list(created.items()))


def _fallbacks(ctx: RunContext, t0: float, t1: float) -> dict[str, float]:
    seconds = max(1, int(t1 - t0 + 2))
    expr = f"sum by (reason) (increase(drs_fallback_decisions_total[{seconds}s]))"
    try:
        return {r["metric"].get("reason", "?"): round(float(r["value"][1]), 1) for r in ctx.prom.query(expr, at=t1)}
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        return {"error": str(exc)}  # type: ignore[dict-item]


def fault_script(ctx: RunContext) -> dict[str, Any]:
    """The five faults in order; one that errors is reported with its error and the next still runs."""
    out: dict[str, Any] = {}
    refresh = max(0.2, ctx.testbed.config.scrape_seconds)

    def record(name: str, t0: float, recovery: float | None, **detail: Any) -> None:
        t1 = time.time()
        time.sleep(2 * refresh)
        out[name] = {
            "at_seconds": round(t0 - ctx.started, 1),
            "recovery_seconds": None if recovery is None else round(recovery, 2),
            "fallback_decisions": _fallbacks(ctx, t0, t1),
            **detail,
        }

    for name, fault in (
        ("prometheus_down", _prometheus_down),
        ("leader_killed", _leader_killed),
        ("exporter_down", _exporter_down),
        ("apiserver_restart", _apiserver_restart),
        ("unschedulable_burst", _unschedulable_burst),
    ):
        time.sleep(SETTLE_SECONDS)
        t0 = time.time()
        try:
            recovery, detail = fault(ctx, refresh)
        except Exception as exc:  # noqa: BLE001 - reported per fault; the script goes on
            log.warning("fault %s failed: %s", name, exc)
            out[name] = {"at_seconds": round(t0 - ctx.started, 1), "error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        record(name, t0, recovery, **detail)
    return out


def _prometheus_down(ctx: RunContext, refresh: float) -> tuple[float | None, dict[str, Any]]:
    ctx.prom.kill()
    time.sleep(PROMETHEUS_DOWN_SECONDS)
    ctx.prom.restart()
    leader = _leader(ctx)
    url = ctx.sched.metrics_urls[leader if leader is not None else 0]
    return _state_recovery(url, refresh), {"down_seconds": PROMETHEUS_DOWN_SECONDS, "measured_from": "restart"}


def _state_recovery(url: str, refresh: float, timeout: float = 90.0) -> float | None:
    """Seconds until the scheduler's node-state refreshes succeed again: ``drs_prometheus_errors_total`` stops
    growing for three refresh periods while ``drs_state_age_seconds`` is fresh (None: not within ``timeout``)."""
    t0 = time.monotonic()
    last, since = None, time.monotonic()
    while time.monotonic() - t0 < timeout:
        m = _scrape(url)
        errors = m.get("drs_prometheus_errors_total")
        if errors != last:
            last, since = errors, time.monotonic()
        elif (
            errors is not None
            and time.monotonic() - since >= 3 * refresh
            and m.get("drs_state_age_seconds", 1e9) < 3 * refresh + 1.0
        ):
            return since - t0
        time.sleep(refresh / 2)
    return None


def _leader_killed(ctx: RunContext, refresh: float) -> tuple[float | None, dict[str, Any]]:
    leader = _leader(ctx)
    if leader is None:
        raise RuntimeError("no replica reported drs_leader 1")
    t0 = time.time()
    ctx.sched.procs[leader].kill()
    other = 1 - leader
    rec_lead = _poll(lambda: _scrape(ctx.sched.metrics_urls[other]).get("drs_leader") == 1.0, 90)
    rec_bind = _poll(lambda: _bound_after(ctx, t0), 90)
    rec = None if rec_lead is None or rec_bind is None else max(rec_lead, rec_bind)
    return rec, {"new_leader_seconds": rec_lead, "next_bind_seconds": rec_bind}


def _exporter_down(ctx: RunContext, refresh: float) -> tuple[float | None, dict[str, Any]]:
    node = ctx.live.nodes.names[0]
    ctx.exporter.stop_node(node)
    time.sleep(EXPORTER_DOWN_SECONDS)
    ctx.exporter.restart_node(node)
    fresh = f'time() - timestamp(node_uname_info{{nodename="{node}"}}) < {4 * refresh}'
    in_prometheus = _poll(lambda: bool(ctx.prom.query(fresh)), 90)
    leader = _leader(ctx)
    url = ctx.sched.metrics_urls[leader if leader is not None else -1]
    state = _state_recovery(url, refresh)
    rec = None if state is None or in_prometheus is None else in_prometheus + state
    return rec, {
        "node": node,
        "down_seconds": EXPORTER_DOWN_SECONDS,
        "measured_from": "restart",
        "prometheus_fresh_seconds": in_prometheus,
    }


def _apiserver_restart(ctx: RunContext, refresh: float) -> tuple[float | None, dict[str, Any]]:
    cp = ctx.testbed.cp
    assert cp is not None
    restart = cp.restart_apiserver()
    t_back = time.time()
    rec = _poll(lambda: _bound_after(ctx, t_back), 120)
    return (None if rec is None else restart + rec), {"apiserver_down_seconds": round(restart, 2)}


def _unschedulable_burst(ctx: RunContext, refresh: float) -> tuple[float | None, dict[str, Any]]:
    from kubernetes import client

    cp = ctx.testbed.cp
    assert cp is not None
    core = client.CoreV1Api(cp.admin_client)
    t0 = time.time()
    burst = [f"unfit-{i}" for i in range(BURST)]
    for name in burst:
        drained(
            core.create_namespaced_pod(
                ctx.namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name},
                    "spec": {
                        "schedulerName": DRS_SCHEDULER_NAME,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "1000"}},
                            }
                        ],
                    },
                },
                _preload_content=False,
            )
        )
    rec = _poll(lambda: _bound_after(ctx, t0 + 0.5), 90)
    time.sleep(5)
    bound = [n for n in burst if n in ctx.kubelet.stats.bound_node]
    for name in burst:
        drained(core.delete_namespaced_pod(name, ctx.namespace, grace_period_seconds=0, _preload_content=False))
    return rec, {"burst": BURST, "burst_bound": len(bound)}


def fault_scenario(scenario: Scenario, pods: int, speed: float) -> Scenario:
    """The scenario with ``pods`` uniform arrivals spread over FAULT_WALL_SECONDS of wall time."""
    rate = pods / (FAULT_WALL_SECONDS * speed)
    return scenario.with_changes(arrivals=[{"pods": pods, "rate_per_second": rate, "process": "uniform"}])


def run_faults(tb: Testbed, seed: int, pods: int | None, echo: Callable[[str], None]) -> dict[str, Any]:
    """The fault run on ``tb``'s nodes with drs-prom in 2 replicas; returns the run's counts and each fault."""
    n = max(pods or 0, 300)
    sc = fault_scenario(tb.scenario, n, tb.config.speed)
    wl = workload_for(sc, seed, None)
    old = tb.config.replicas
    tb.config.replicas = 2
    try:
        echo(f"fault run: drs-prom x2 replicas, {n} pods over ~{FAULT_WALL_SECONDS:.0f}s on {len(tb.nodes)} nodes")
        r = tb.run_one(DRS, seed, wl, fault_script=fault_script)
    finally:
        tb.config.replicas = old
    keys = ("pods", "bound", "completed", "lost", "double_bound", "infeasible", "fallback_decisions", "wall_seconds")
    result = {k: r[k] for k in keys} | {"faults": r["faults"], "lost_pods": r["lost_pods"]}
    for name, f in r["faults"].items():
        echo(f"  {name}: recovery {f.get('recovery_seconds')} s, fallbacks {f.get('fallback_decisions')}")
    echo(
        f"  whole fault run: bound {r['bound']}/{r['pods']} completed {r['completed']} lost {r['lost']} "
        f"double-bound {r['double_bound']} infeasible {r['infeasible']}"
    )
    return result
