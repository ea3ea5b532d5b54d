"""Scrape cost of our exporter vs node_exporter (printed, not asserted as a wall-clock limit)."""

from __future__ import annotations

import pytest

from tests.prom.scrape_cost import measure, report


@pytest.mark.integration
def test_scrape_cost_is_measured_against_node_exporter(prometheus_both, drs_exporter, node_exporter_real, capsys):
    # prometheus_both keeps scraping both every second while the CPU share is measured.
    ours, real, inproc = measure(
        drs_exporter.url, drs_exporter.pid, node_exporter_real.url, node_exporter_real.pid, scraped_elsewhere=True
    )
    with capsys.disabled():
        print("\n" + report(ours, real, inproc))
    assert ours.median_ms > 0 and real.median_ms > 0 and inproc > 0
    assert 0 < ours.cpu_share < 2 and 0 <= real.cpu_share < 2  # CPU time of a live process, at most 2 cores
