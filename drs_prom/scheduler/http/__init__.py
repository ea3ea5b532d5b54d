"""The scheduler's HTTP side: /metrics, /healthz and /readyz, TLS with delegated authentication, the metric
families, and the kube-scheduler extender endpoint.
"""
