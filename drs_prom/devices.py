"""Which network and block devices count as a node's traffic and disk IO (regexes shared by both ends).

The exporter (exporters.node_exporter) leaves these devices out of what it serves and the PromQL side
(drs_prom.config's defaults) leaves them out of what it reads, so both must use the same text. It lives
here, with no imports, because the exporter image carries only psutil and prometheus-client: it cannot
import drs_prom.config (pydantic, PyYAML).
"""

from __future__ import annotations

NET_DEVICE_EXCLUDE = "^(lo|veth.*|docker.*|cni.*|flannel.*|cali.*|cilium.*|lxc.*|virbr.*|br-.*|tunl.*|vxlan.*|genev.*|ifb.*|kube-ipvs.*)$"
"""Loopback and virtual interfaces, like node_exporter's --collector.netdev.device-exclude."""

DISK_DEVICE_EXCLUDE = r"^(z?ram|loop|fd|sr|dm-|md|(h|s|v|xv)d[a-z]|nvme\d+n\d+p|mmcblk\d+p)\d+$"
"""Virtual block devices and partitions (their whole disk is counted): node_exporter's diskstats default,
plus zram/dm/md/sr."""
