"""drs-prom: a Kubernetes scheduler that places pods with a DQN policy fed by Prometheus.

The README's "How it fits together" lists every module from the top layer (cli) down to the
pure base (features, config, promql, state, reward, filters, policy); the import-linter
contracts in pyproject.toml keep the arrows pointing one way.
"""

__version__ = "0.1.0"
