"""The node table says which device resources the candidates advertise exactly as the device stages read them from
the candidates' NodeInfo (drs_prom.policies.device_stage.device_resources), for any nodes and any sample of them."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from drs_prom.policies.device_stage import device_resources
from drs_prom.scheduler.watch.nodes import NodeTable
from drs_prom.types import NodeInfo

SCALARS = ("nvidia.com/gpu", "amd.com/gpu", "example.com/fpga", "hugepages-2Mi", "ephemeral-storage")

nodes = st.lists(st.dictionaries(st.sampled_from(SCALARS), st.integers(0, 3), max_size=4), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(nodes, st.data())
def test_the_tables_devices_of_any_candidates_are_those_their_nodes_advertise(scalars, data):
    base = [NodeInfo(f"n{i:02d}", 4000, 1 << 33, allocatable_scalar=s) for i, s in enumerate(scalars)]
    view = NodeTable(base, version=1).view()
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(base) - 1), min_size=1))), dtype=np.int64)
    assert view.devices(rows) == device_resources(view.infos(rows))


def test_a_cluster_without_devices_has_none_and_a_device_at_zero_does_not_count():
    cpu = [NodeInfo("a", 4000, 1 << 33, allocatable_scalar={"ephemeral-storage": 10, "hugepages-2Mi": 2})]
    assert NodeTable(cpu, version=1).view().devices(np.array([0])) == ()
    gpu = [*cpu, NodeInfo("b", 4000, 1 << 33, allocatable_scalar={"nvidia.com/gpu": 0, "amd.com/gpu": 8})]
    view = NodeTable(gpu, version=1).view()
    assert view.devices(np.array([0])) == () and view.devices(np.array([0, 1])) == ("amd.com/gpu",)
