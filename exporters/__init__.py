"""The node exporter (node_exporter-compatible metric names from psutil), started by ``drs-prom export``.

Below drs_prom.sim (whose served clusters reuse its exposition) and above drs_prom.config; it knows nothing of the CLI.
"""
