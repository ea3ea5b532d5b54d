"""Where drs-prom's scheduler process spends its CPU, from py-spy raw (collapsed) stacks.

    py-spy record --gil --format raw -o prof.txt -- drs-prom run ...   (or sched_throughput.py --py-spy DIR)
    python benchmarks/profile_breakdown.py prof.txt [more.txt ...] [--pods N]

Startup (imports, loading the model) is counted apart. Each other sample is put in the first category (in the order below) one of its frames
matches, so an HTTP call made while binding counts as "bind round trip", and JSON decoding
inside the watch as "watch decode". With ``--gil`` only the thread holding the GIL is
sampled, i.e. the Python CPU that limits the scheduler; time in C without the GIL (socket
waits) is not counted. ``--pods`` prints ms of sampled CPU per pod (samples at 200 Hz).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

STARTUP = "startup (imports, model load)"
CATEGORIES: tuple[tuple[str, str], ...] = (
    (STARTUP, r"Command\.main|_find_and_load"),
    ("journal", r"journal\.py"),
    ("event", r"emit_event|_event \(.*loop\.py"),
    ("bind round trip", r"\bbind \(.*scheduler/write/bind\.py"),
    ("metrics refresh (Prometheus)", r"refresh \(.*decide\.py|prometheus\.py|ModelWatcher|model_store"),
    ("scoring (policy + model)", r"\bchoose \(|agent/numpy_policy\.py|agent/model_inputs\.py|baselines\.py"),
    ("state (load rows, pod matrix)", r"\bload \(.*decide\.py|node_load|pod_matrix|node_matrix"),
    ("filters + sampling", r"constraints/|nodes\.py|_candidates|feasible"),
    ("cache view / assume", r"\bview \(|\bassume \(|\bforget \(|node_infos|_current_table|_expire_assumed"),
    ("pod parsing (requests, demand)", r"pod_demand\.py|owners\.py|estimator\.py|pod_usage\.py|kube\.py"),
    ("queue", r"queue\.py"),
    ("watch: cache update", r"_on_pod_event|_on_node_event|_on_pod_list|_on_node_list"),
    ("watch: decode (json)", r"json/decoder|json/__init__|\bloads \("),
    ("watch: read", r"_lines|_watch \("),
    ("scheduling loop (other)", r"schedule_one|_schedule_loop"),
    ("bind worker (other)", r"_bind \("),
    ("http /metrics", r"serve_forever|wsgiref|http/server|socketserver"),
    ("own metrics (counters, histograms)", r"metrics\.py|prometheus_client"),
)


def categorise(stack: str) -> str:
    frames = stack.split(";")
    for name, pattern in CATEGORIES:
        rx = re.compile(pattern)
        if any(rx.search(f) for f in frames):
            return name
    return "other (startup, threads, GC)"


def breakdown(paths: list[Path]) -> Counter:
    counts: Counter = Counter()
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            if stack and n.isdigit():
                counts[categorise(stack)] += int(n)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--pods", type=int, default=0, help="pods bound in the profiled runs (for ms per pod)")
    ap.add_argument("--rate", type=float, default=200.0, help="py-spy sampling rate (Hz)")
    args = ap.parse_args()
    counts = breakdown(args.files)
    startup = counts.pop(STARTUP, 0)
    print(f"{STARTUP:<34}{startup:>8} samples (left out below)")
    total = sum(counts.values()) or 1
    for name, n in counts.most_common():
        per_pod = f"{n / args.rate / args.pods * 1000:8.3f} ms/pod" if args.pods else ""
        print(f"{name:<34}{n:>8} samples {100 * n / total:6.1f}% {per_pod}")
    if args.pods:
        print(f"{'total':<34}{total:>8} samples         {total / args.rate / args.pods * 1000:8.3f} ms/pod")


if __name__ == "__main__":
    main()
