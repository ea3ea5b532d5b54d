"""drs-prom: a Kubernetes scheduler that places pods with a DQN policy fed by Prometheus."""

__version__ = "0.1.0"
