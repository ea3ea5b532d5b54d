"""CPU per decision-journal row on the scheduler's own path: the row ``Scheduler._journal`` builds, the journal's
codec, and the SQLite insert, for a decision over N candidates (printed, never asserted).

    python benchmarks/journal_row_cost.py --candidates 100,420 --rows 2000

Run it from two checkouts (``PYTHONPATH=<checkout>``) to compare builds; the rows' values are the same for any
build (tests/retrain/test_journal.py checks the codec's text reads back as json.dumps kept it).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def row_cost(n: int, rows: int) -> tuple[float, float]:
    """(ms per row to build and encode, ms per row to insert) for decisions over ``n`` candidates, all feasible."""
    from drs_prom.scheduler import loop
    from drs_prom.scheduler.decision.arms import Choice
    from drs_prom.scheduler.decision.decided import DecidedPod
    from drs_prom.scheduler.watch.queue import QueuedPod
    from drs_prom.stores import journal
    from drs_prom.types import NodeInfo, PodRequest

    rng = np.random.default_rng(0)
    nodes = [
        NodeInfo(name=f"fake-node-{i:04d}", allocatable_cpu_m=64000, allocatable_mem_bytes=256 << 30) for i in range(n)
    ]
    pod = PodRequest(name="p", cpu_m=100, mem_bytes=1 << 20, uid="u" * 36, namespace="default", owner="Pod/p")
    requests = np.column_stack(
        [
            rng.integers(0, 64000, n),
            np.full(n, 64000),
            rng.integers(0, 1 << 36, n),
            np.full(n, 256 << 30),
            rng.integers(0, 50, n),
            np.full(n, 500),
        ]
    ).astype(np.float64)
    policy = types.SimpleNamespace(name="drs", version="bench")
    choice = Choice(index=1, scores=rng.normal(size=n), policy=policy, reason=None)
    decided = DecidedPod(
        QueuedPod.__new__(QueuedPod),
        {},
        pod,
        (0.1, 1e8, 1e5, 1e5, 0.0, 1e6),
        nodes[1].name,
        nodes,
        np.ones(n, bool),
        choice,
        requests,
        0.0,
    )
    queued: list = []
    scheduler = types.SimpleNamespace(journal=types.SimpleNamespace(append_later=queued.append))
    encoded = []
    t0 = time.process_time()
    for _ in range(rows):
        loop.Scheduler._journal(scheduler, decided, "bound")  # type: ignore[arg-type]
        encoded.append(journal._row(queued.pop()()))
    t1 = time.process_time()
    with tempfile.TemporaryDirectory() as tmp:
        j = journal.Journal(os.path.join(tmp, "journal.sqlite"))
        t2 = time.process_time()
        for i in range(0, rows, journal.BATCH_ROWS):  # the writer thread's transactions
            batch = encoded[i : i + journal.BATCH_ROWS]
            cols = batch[0][0]
            with j._db:
                j._db.executemany(
                    f"INSERT INTO decisions ({cols}) VALUES ({journal._marks(cols)})", [b[1] for b in batch]
                )
        t3 = time.process_time()
        j.close()
    return (t1 - t0) / rows * 1000, (t3 - t2) / rows * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", default="100,420", help="comma-separated candidate counts")
    ap.add_argument("--rows", type=int, default=2000)
    args = ap.parse_args()
    for n in (int(x) for x in args.candidates.split(",")):
        build, insert = row_cost(n, args.rows)
        print(
            f"{n:5d} candidates: build + encode {build:.3f} ms, insert {insert:.3f} ms, {build + insert:.3f} ms per row"
        )


if __name__ == "__main__":
    main()
