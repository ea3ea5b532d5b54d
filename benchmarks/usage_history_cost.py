"""CPU the live scheduler's usage history spends reading what a burst of new owners stored, per pod.

    python benchmarks/usage_history_cost.py [--pods 500] [--image registry.k8s.io/pause:3.10]

A real Prometheus (started here, ended here, holding no cAdvisor series: every read answers with nothing, as for
pods no one has run before) and drs-prom's ``PrometheusUsageHistory`` as the scheduler builds it. ``--pods`` bare
pods (each its own owner, the benchmark's and a batch system's pods) ask for their owner and their image, as the
scheduler asks when the pods watch sees them pending; the refresher's work is then done on this thread and its
thread CPU time printed per pod, with the number of queries. Printed, never asserted; run it on two trees with
PYTHONPATH to compare them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drs_prom.config import PrometheusSettings, UsageSettings
from drs_prom.signals.pod_usage import PrometheusUsageHistory
from drs_prom.signals.prometheus import PrometheusSource
from tests.prom.fixtures import Counted, start_prometheus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--image", default="registry.k8s.io/pause:3.10")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prom = start_prometheus(Path(tmp))
        try:
            client = PrometheusSource(PrometheusSettings(url=prom.url, timeout_seconds=10.0))
            source = Counted(client)
            history = PrometheusUsageHistory(source, UsageSettings())
            for i in range(20):  # the connection made and the first answers read before the clock starts
                history.owner("bench", f"Pod/warm-{i}", 0.0)
                history.image("bench", args.image, f"Pod/warm-{i}", 0.0)
            history.refresh_queued()
            source.queries = 0
            for i in range(args.pods):
                history.owner("bench", f"Pod/pod-{i:05d}", 0.0)
                history.image("bench", args.image, f"Pod/pod-{i:05d}", 0.0)
            cpu, wall = time.thread_time(), time.perf_counter()
            keys = history.refresh_queued()
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            client.close()
        finally:
            prom.stop()
    print(
        f"{args.pods} bare pods: {keys} owners and images read in {source.queries} queries; "
        f"{1e3 * cpu / args.pods:.3f} ms of CPU and {1e3 * wall / args.pods:.3f} ms of wall time per pod"
    )


if __name__ == "__main__":
    main()
