"""The state pipeline against a real Prometheus scraping our exporter and Debian's node_exporter."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer

import pandas as pd
import psutil
import pytest
from click.testing import CliRunner

from drs_prom.cli import cli
from drs_prom.errors import MetricsError
from drs_prom.features import FEATURES
from drs_prom.signals.prometheus import PrometheusSource
from drs_prom.signals.state import features_at
from tests.prom.fixtures import free_port, start_drs_exporter, wait_until

pytestmark = pytest.mark.integration

WINDOW = "20s"  # >= 4 scrapes at 1 s; long enough that both exporters' rates line up


def fresh_snapshot(source: PrometheusSource, nodes: set[str], timeout: float = 40.0):
    def ready():
        snap = source.snapshot()
        return snap if nodes <= set(snap.fresh().index) else None

    return wait_until(ready, timeout, f"fresh data for {sorted(nodes)}")


def test_both_exporters_give_six_features_that_agree(prometheus_both, node_exporter_real, drs_exporter):
    ours, theirs = drs_exporter.node_name, node_exporter_real.node_name
    assert ours != theirs  # else avg by(nodename) would merge them
    source = PrometheusSource.from_url(prometheus_both.url, window=WINDOW, max_sample_age_seconds=5)
    # let the 20 s window hold at least 10 samples of both (a fixed sleep gave a run started early only a few)
    wait_until(
        lambda: (
            len(r := prometheus_both.query("count_over_time(node_memory_MemAvailable_bytes[20s])")) >= 2
            and min(float(x["value"][1]) for x in r) >= 10
        ),
        60,
        "10 samples of both exporters in the window",
    )
    snap = fresh_snapshot(source, {ours, theirs})
    f = snap.features
    assert list(f.columns) == list(FEATURES)
    for node in (ours, theirs):
        row = f.loc[node]
        assert row.notna().all(), row
        assert 0.0 <= row["cpu"] <= 1.0 and 0.0 < row["mem"] < 1.0
        assert (row[["net_rx", "net_tx", "disk_read", "disk_write"]] >= 0).all()
        assert snap.age_seconds[node] <= 5
    # Same machine, same /proc: the two exporters must tell the same story.
    assert abs(f.loc[ours, "cpu"] - f.loc[theirs, "cpu"]) < 0.1, f[["cpu", "mem"]]
    assert abs(f.loc[ours, "mem"] - f.loc[theirs, "mem"]) < 0.02, f[["cpu", "mem"]]
    source.close()


def test_capacity_matches_this_machine(prometheus_both, node_exporter_real, drs_exporter):
    source = PrometheusSource.from_url(prometheus_both.url)
    cap = source.node_capacity()
    for node in (drs_exporter.node_name, node_exporter_real.node_name):
        assert cap.loc[node, "cpu_cores"] == psutil.cpu_count()
        assert cap.loc[node, "mem_bytes"] == psutil.virtual_memory().total


def test_history_is_a_time_indexed_frame(prometheus_both, node_exporter_real, drs_exporter):
    source = PrometheusSource.from_url(prometheus_both.url, window="5s")
    fresh_snapshot(source, {drs_exporter.node_name})

    def ten_seconds():
        end = time.time()
        h = source.history(end - 10, end, step="1s")
        return (end, h) if len(h) >= 8 else None

    end, hist = wait_until(ten_seconds, 30, "10 s of history")
    assert isinstance(hist.index, pd.DatetimeIndex) and str(hist.index.tz) == "UTC"
    assert len(hist) <= 11
    assert hist.columns.names == ["node", "feature"]
    for node in (drs_exporter.node_name, node_exporter_real.node_name):
        cpu = hist[(node, "cpu")].dropna()
        assert len(cpu) >= 5 and cpu.between(0, 1).all()
    at = features_at(hist, -1)
    assert list(at.columns) == list(FEATURES) and set(at.index) >= {
        drs_exporter.node_name,
        node_exporter_real.node_name,
    }
    empty = source.history(datetime(2001, 1, 1, tzinfo=UTC), datetime(2001, 1, 1, 0, 1, tzinfo=UTC), 15)
    assert empty.empty  # no data then: an empty frame, not an exception
    with pytest.raises(MetricsError, match="points"):
        source.history(0, end, step=1)


def test_stopped_exporter_turns_stale_not_zero(prometheus_factory, tmp_path):
    exp = start_drs_exporter(tmp_path, node_name="drs-stale-node")
    try:
        prom = prometheus_factory(scrape_targets=[exp.target])
        source = PrometheusSource.from_url(prom.url, window="5s", max_sample_age_seconds=3)
        before = fresh_snapshot(source, {"drs-stale-node"})
        assert "drs-stale-node" not in before.stale
        exp.stop()
        after = wait_until(
            lambda: (s := source.snapshot()) and "drs-stale-node" in s.stale and s, 20, "node to turn stale"
        )
        # Its series vanish at once (staleness marker), so features go missing first ...
        assert after.features.loc["drs-stale-node"].isna().all()  # never read as idle
        assert after.fresh().empty
        # ... and the node stays listed, stale, with a growing age past max age.
        later = wait_until(
            lambda: (s := source.snapshot()).age_seconds.get("drs-stale-node", 0) > 3 and s, 20, "age > 3 s"
        )
        assert "drs-stale-node" in later.stale and later.features.loc["drs-stale-node"].isna().all()
    finally:
        exp.stop()


def test_expected_node_without_series_is_stale(prometheus_both, drs_exporter):
    source = PrometheusSource(
        PrometheusSource.from_url(prometheus_both.url, window="5s").settings, expected_nodes=lambda: ["ghost-node"]
    )
    snap = source.snapshot()
    assert "ghost-node" in snap.stale and snap.features.loc["ghost-node"].isna().all()


def test_scalar_reads_the_first_sample_or_none(prometheus_both, node_exporter_real, drs_exporter):
    source = PrometheusSource.from_url(prometheus_both.url)
    assert source.scalar('count(up{job!=""})') >= 2.0  # both exporters are scrape targets
    assert source.scalar('up{job="no-such-job"}') is None


def test_unreachable_prometheus_raises_one_metrics_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(MetricsError) as err:
        PrometheusSource.from_url(url).snapshot()
    msg = str(err.value)
    assert url in msg and "unreachable" in msg and "node_cpu_seconds_total" in msg and "\n" not in msg


def test_http_error_names_url_query_and_reason(prometheus_both):
    source = PrometheusSource.from_url(prometheus_both.url)
    with pytest.raises(MetricsError, match=r"answered HTTP 400: .*parse error.* for query: sum\($"):
        source.query("sum(")


def test_nan_from_prometheus_raises(prometheus_both):
    source = PrometheusSource.from_url(prometheus_both.url)
    with pytest.raises(MetricsError, match="NaN/Inf for node x"):
        source.query('label_replace(vector(NaN), "nodename", "x", "", "")')


class _Silent(BaseHTTPRequestHandler):
    """Fake Prometheus: a real server cannot be made to hang or to send junk on demand."""

    def do_GET(self):
        if self.server.mode == "hang":  # type: ignore[attr-defined]
            time.sleep(3)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b"<html>not json</html>")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first: that is the point of "hang"

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_prometheus():
    servers = []

    def start(mode: str) -> str:
        srv = HTTPServer(("127.0.0.1", 0), _Silent)
        srv.mode = mode  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_port}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_timeout_raises_metrics_error(fake_prometheus):
    url = fake_prometheus("hang")
    with pytest.raises(MetricsError, match=r"timed out after 0.5s on query: .*node_cpu_seconds_total"):
        PrometheusSource.from_url(url, timeout_seconds=0.5).snapshot()


def test_malformed_response_raises_metrics_error(fake_prometheus):
    url = fake_prometheus("junk")
    with pytest.raises(MetricsError, match=f"{url} returned a malformed response"):
        PrometheusSource.from_url(url).snapshot()


def test_state_command_prints_the_node_table(prometheus_both, node_exporter_real, drs_exporter):
    fresh_snapshot(
        PrometheusSource.from_url(prometheus_both.url, window="5s"),
        {drs_exporter.node_name, node_exporter_real.node_name},
    )
    result = CliRunner().invoke(cli, ["state", "--prometheus", prometheus_both.url, "--window", "5s", "--normalised"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["cpu_%", "mem_%", "net_rx_KB/s"]
    rows = {line.split()[0]: line.split() for line in lines[2:4]}
    assert set(rows) == {drs_exporter.node_name, node_exporter_real.node_name}
    assert all(r[-1] == "ok" for r in rows.values())
    assert "normalised:" in result.output


def test_state_command_unreachable_is_one_line_exit_2():
    url = f"http://127.0.0.1:{free_port()}"
    out = subprocess.run(
        [sys.executable, "-c", "from drs_prom.cli import main; main()", "state", "--prometheus", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"drs-prom: error: Prometheus at {url} is unreachable")
