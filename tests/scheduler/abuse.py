"""Abuse of the extender port: what a stranger (or a broken client) can send, while a
well-behaved client keeps asking for filter decisions.

Starts ``drs-prom extender`` as its own process on 127.0.0.1 (so a crash is visible as an
exit and its RSS is its own), then, concurrently with a valid-request loop:

* malformed JSON, JSON of the wrong types, bodies without Content-Length, unknown verbs;
* 10 MB bodies (refused with 413 before being read) and lying Content-Lengths;
* thousands of nodes in one request (within the body limit);
* slow clients (slowloris: a header byte every half second) and a flood of idle connections.

Prints N abusive requests by kind, crashes (0 or 1: the process exited), RSS before/after,
and the p50/p99 of the valid requests during the abuse. Never asserts timings.
Run alone: ``python -m tests.scheduler.abuse --requests 2000``; the suite runs a short
version (tests/scheduler/test_extender_abuse.py) that asserts behaviour only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from tests.k8s.harness import free_port


def node(name: str, cpu: str = "4") -> dict:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


VALID_ARGS = {
    "Pod": {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]},
    },
    "Nodes": {"items": [node("big"), node("small", cpu="1")]},
}


@dataclass
class ExtenderProcess:
    proc: subprocess.Popen
    port: int
    log: Path

    @property
    def rss(self) -> int:
        return psutil.Process(self.proc.pid).memory_info().rss

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def start_extender(workdir: Path, request_timeout: float = 2.0, max_body: int = 8 * 2**20) -> ExtenderProcess:
    """``drs-prom extender --no-cache`` with a Prometheus URL nobody listens on: every decision
    takes the documented fallback, which is what we want to keep answering under abuse."""
    port = free_port()
    cfg = workdir / "extender.yaml"
    cfg.write_text(
        json.dumps(
            {
                "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "timeout_seconds": 0.5},
                "serving": {"request_timeout_seconds": request_timeout, "max_body_bytes": max_body},
            }
        )
    )
    log = workdir / "extender.log"
    fh = open(log, "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from drs_prom.cli import main; main()",
            "extender",
            "--listen",
            f"127.0.0.1:{port}",
            "--no-cache",
            "--config",
            str(cfg),
        ],
        stdout=fh,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
    )
    fh.close()
    ext = ExtenderProcess(proc, port, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not ext.alive():
            raise RuntimeError(f"extender exited at start: {log.read_text()[-2000:]}")
        try:
            if request(port, "GET", "/healthz")[0] == 200:
                return ext
        except OSError:
            time.sleep(0.2)
    ext.stop()
    raise RuntimeError("extender did not answer /healthz within 120 s")


def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 10.0
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def raw_send(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Bytes as written (lies included), and whatever comes back until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except OSError:
            pass
        return out


# -- the abusive kinds: each returns the status (or -1: connection cut) --------------------


def _post(port: int, body: bytes, verb: str = "filter") -> int:
    try:
        return request(port, "POST", f"/{verb}", body, {"Content-Type": "application/json"})[0]
    except (OSError, http.client.HTTPException):
        return -1


def malformed_json(port: int, rng: random.Random) -> int:
    return _post(port, rng.choice([b"{", b"[1,2", b"\xff\xfe\x00", b"nul", b'{"Pod": }', b"[" * 100000]))


def wrong_types(port: int, rng: random.Random) -> int:
    bodies = [
        [],
        5,
        "x",
        {"Pod": []},
        {"Nodes": 7},
        {"Nodes": {"items": [1]}},
        {"NodeNames": [1, 2]},
        {"Pod": {"spec": {"containers": "many"}}, "Nodes": {"items": []}},
    ]
    return _post(port, json.dumps(rng.choice(bodies)).encode(), rng.choice(["filter", "prioritize"]))


def ten_megabytes(port: int, rng: random.Random) -> int:
    body = b'{"Pod": "' + b"x" * (10 * 2**20) + b'"}'
    head = f"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    out = raw_send(port, head + body, timeout=15)
    return int(out.split(b" ")[1]) if out.startswith(b"HTTP/") else -1


def lying_length(port: int, rng: random.Random) -> int:
    out = raw_send(port, b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{}", timeout=15)
    return int(out.split(b" ")[1]) if out.startswith(b"HTTP/") else -1


def no_length(port: int, rng: random.Random) -> int:
    out = raw_send(port, b"POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    return int(out.split(b" ")[1]) if out.startswith(b"HTTP/") else -1


def thousands_of_nodes(port: int, rng: random.Random) -> int:
    args = {"Pod": VALID_ARGS["Pod"], "Nodes": {"items": [node(f"n{i}") for i in range(rng.choice([2000, 5000]))]}}
    return _post(port, json.dumps(args).encode(), rng.choice(["filter", "prioritize"]))


def slowloris(port: int, rng: random.Random) -> int:
    """A request trickled a byte every 0.5 s: cut by the server's whole-request deadline."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            for b in b"POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200:
                s.sendall(bytes([b]))
                time.sleep(0.5)
                if time.monotonic() - t0 > 60:
                    return 0  # never cut: the server waited a minute for one request
    except OSError:
        return -1  # cut, as it should be
    return 0


def idle_flood(port: int, rng: random.Random) -> int:
    """200 connections that never send anything, held for 3 s."""
    socks = []
    try:
        for _ in range(200):
            try:
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        time.sleep(3)
    finally:
        for s in socks:
            s.close()
    return len(socks)


KINDS = {
    "malformed_json": malformed_json,
    "wrong_types": wrong_types,
    "10MB_body": ten_megabytes,
    "lying_content_length": lying_length,
    "chunked_no_length": no_length,
    "thousands_of_nodes": thousands_of_nodes,
    "slowloris": slowloris,
    "idle_flood_200": idle_flood,
}
WEIGHTS = {
    "malformed_json": 30,
    "wrong_types": 30,
    "10MB_body": 5,
    "lying_content_length": 5,
    "chunked_no_length": 10,
    "thousands_of_nodes": 5,
    "slowloris": 2,
    "idle_flood_200": 1,
}


@dataclass
class Report:
    sent: Counter = field(default_factory=Counter)
    statuses: dict[str, Counter] = field(default_factory=dict)
    valid_ms: list[float] = field(default_factory=list)
    valid_wrong: int = 0
    valid_failed: int = 0
    rss_before: int = 0
    rss_after: int = 0
    crashed: bool = False

    def percentile(self, q: float) -> float:
        if not self.valid_ms:
            return float("nan")
        xs = sorted(self.valid_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    def lines(self) -> list[str]:
        out = [f"abusive requests: {sum(self.sent.values())} ({', '.join(f'{k} {v}' for k, v in self.sent.items())})"]
        for k, c in self.statuses.items():
            out.append(f"  {k}: answers {dict(c)}")
        out.append(f"crashes: {int(self.crashed)}")
        out.append(
            f"RSS: {self.rss_before / 2**20:.1f} MiB before, {self.rss_after / 2**20:.1f} MiB after "
            f"({(self.rss_after - self.rss_before) / 2**20:+.1f} MiB)"
        )
        out.append(
            f"valid filter requests during the abuse: {len(self.valid_ms)} answered correctly, "
            f"{self.valid_wrong} wrong, {self.valid_failed} failed; "
            f"p50 {self.percentile(0.5):.1f} ms, p99 {self.percentile(0.99):.1f} ms"
        )
        return out


def valid_answer_ok(status: int, body: bytes) -> bool:
    if status != 200:
        return False
    out = json.loads(body)
    return [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["big"] and "small" in out["FailedNodes"]


def abuse(ext: ExtenderProcess, n: int, workers: int = 8, seed: int = 0, kinds: dict | None = None) -> Report:
    kinds = kinds or KINDS
    rep = Report(rss_before=ext.rss)
    rng = random.Random(seed)
    plan = rng.choices(list(kinds), weights=[WEIGHTS.get(k, 1) for k in kinds], k=n)
    for k in kinds:  # every kind at least once
        if k not in plan:
            plan[rng.randrange(len(plan))] = k
    lock = threading.Lock()
    stop = threading.Event()
    valid_body = json.dumps(VALID_ARGS).encode()

    def valid_loop() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                status, body = request(ext.port, "POST", "/filter", valid_body, {"Content-Type": "application/json"})
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    if valid_answer_ok(status, body):
                        rep.valid_ms.append(ms)
                    else:
                        rep.valid_wrong += 1
            except (OSError, http.client.HTTPException):
                with lock:
                    rep.valid_failed += 1
            time.sleep(0.02)

    def worker(items: list[str], wseed: int) -> None:
        wrng = random.Random(wseed)
        for kind in items:
            status = kinds[kind](ext.port, wrng)
            with lock:
                rep.sent[kind] += 1
                rep.statuses.setdefault(kind, Counter())[status] += 1

    vt = threading.Thread(target=valid_loop, daemon=True)
    vt.start()
    threads = [threading.Thread(target=worker, args=(plan[i::workers], seed + i), daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    time.sleep(1.0)  # a few valid requests after the abuse
    stop.set()
    vt.join(30)
    rep.crashed = not ext.alive()
    if not rep.crashed:
        rep.rss_after = ext.rss
    return rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="drs-abuse-") as d:
        ext = start_extender(Path(d))
        try:
            # warm up (first decisions build the fallback policy), then measure
            for _ in range(20):
                request(ext.port, "POST", "/filter", json.dumps(VALID_ARGS).encode())
            rep = abuse(ext, a.requests, a.workers, a.seed)
        finally:
            ext.stop()
    print("\n".join(rep.lines()))


if __name__ == "__main__":
    main()
