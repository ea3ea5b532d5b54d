"""NodePorts: the host ports the pod asks for must be free on the node (its placed pods hold the others)."""

from __future__ import annotations

from collections.abc import Sequence

from drs_prom.constraints.framework import ClusterHints, Filter, Stage
from drs_prom.constraints.placed import Neighbours
from drs_prom.types import HostPort, NodeInfo, PodRequest

R_PORTS = "node(s) didn't have free ports for the requested pod ports"
WILDCARD_IP = "0.0.0.0"


def ports_conflict(want: Sequence[HostPort], used: Sequence[HostPort]) -> bool:
    """HostPortInfo.CheckConflict: a wildcard address clashes with the same protocol/port on any
    address; a specific address with itself and with the wildcard."""
    if not want or not used:
        return False
    taken = {(p.host_ip or WILDCARD_IP, p.protocol or "TCP", p.port) for p in used if p.port > 0}
    by_proto_port = {(proto, port) for _, proto, port in taken}
    for p in want:
        if p.port <= 0:
            continue
        ip, proto = p.host_ip or WILDCARD_IP, p.protocol or "TCP"
        if ip == WILDCARD_IP:
            if (proto, p.port) in by_proto_port:
                return True
        elif (WILDCARD_IP, proto, p.port) in taken or (ip, proto, p.port) in taken:
            return True
    return False


class NodePorts(Filter):
    name = "NodePorts"
    stage = Stage.PLACED
    order = 40

    def needed(self, pod: PodRequest, hints: ClusterHints) -> bool:
        return bool(pod.ports)

    def reasons(self, pod: PodRequest, node: NodeInfo, state: object, near: Neighbours) -> Sequence[str]:
        if not pod.ports:
            return ()
        used = [hp for p in near.pods_by_node.get(node.name, ()) for hp in p.ports]
        return (R_PORTS,) if ports_conflict(pod.ports, used) else ()


FILTER = NodePorts()
