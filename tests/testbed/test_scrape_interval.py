"""The testbed's default scrape interval keeps every node's two pages servable by the one process that renders them:
0.5 s for small clusters, longer in 0.5 s steps as the node count grows."""

import pytest

from drs_prom.testbed.api import auto_scrape_seconds


@pytest.mark.parametrize(
    ("nodes", "seconds"), [(1, 0.5), (6, 0.5), (50, 0.5), (51, 1.0), (89, 1.0), (100, 1.0), (101, 1.5), (1000, 10.0)]
)
def test_the_default_scrape_interval_grows_with_the_node_count(nodes, seconds):
    assert auto_scrape_seconds(nodes) == seconds
