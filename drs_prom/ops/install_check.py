"""What `helm test` asks of an installed drs-prom: the scheduler answers /readyz, and Prometheus holds the
series of drs-prom's recording rules (so the exporter is scraped and the PrometheusRule is loaded).

Each check is one named line with a verdict, so a failed ``helm test`` says which part of the install is
missing in its log (``kubectl logs drs-prom-test``) instead of only "pod failed".
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass

from drs_prom.config import PrometheusSettings
from drs_prom.errors import MetricsError
from drs_prom.signals import promql
from drs_prom.signals.prometheus import PrometheusSource

NODE_GROUP = "drs-node-features"
"""The recording rules every install has: computed from the node exporter's series alone."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def node_records() -> list[str]:
    """The recorded series names of the node-features group, as the chart's PrometheusRule defines them."""
    groups = promql.rule_groups()["groups"]
    return [r["record"] for g in groups if g["name"] == NODE_GROUP for r in g["rules"] if "record" in r]


def _tls_context(ca_file: str, insecure_skip_verify: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca_file or None)
    if insecure_skip_verify:  # a self-signed serving certificate: nothing to verify it against
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def check_readyz(base_url: str, ca_file: str = "", insecure_skip_verify: bool = False, timeout: float = 5.0) -> Check:
    """GET <base_url>/readyz (open to probes, no token needed): 200 "ok" when the scheduler leads or stands by ready."""
    url = base_url.rstrip("/") + "/readyz"
    ctx = _tls_context(ca_file, insecure_skip_verify) if url.startswith("https://") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            body = resp.read(200).decode(errors="replace").strip()
            return Check("scheduler /readyz", resp.status == 200, f"{url} answered {resp.status} {body!r}")
    except urllib.error.HTTPError as exc:
        return Check("scheduler /readyz", False, f"{url} answered {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check("scheduler /readyz", False, f"{url} unreachable: {reason}")


def check_records(settings: PrometheusSettings, names: list[str] | None = None) -> list[Check]:
    """One check per recorded series: Prometheus returns at least one series for it (a node, usually several)."""
    source = PrometheusSource(settings)
    try:
        out = []
        for name in names or node_records():
            try:
                count = source.scalar(f"count({name})")
            except MetricsError as exc:
                out.append(Check(name, False, str(exc)))
                continue
            if count:
                out.append(Check(name, True, f"{count:g} series"))
            else:
                out.append(
                    Check(
                        name,
                        False,
                        f"no series at {source.url}: is the PrometheusRule loaded and the exporter scraped?",
                    )
                )
        return out
    finally:
        source.close()


def check_install(
    settings: PrometheusSettings, scheduler_url: str, ca_file: str = "", insecure_skip_verify: bool = False
) -> list[Check]:
    """Every check, in the order a reader fixes them: the scheduler first, then Prometheus' series."""
    return [check_readyz(scheduler_url, ca_file, insecure_skip_verify), *check_records(settings)]
