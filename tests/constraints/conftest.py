"""The live-scheduler fixtures of tests/scheduler (the real apiserver, the ServiceAccount, in-process schedulers)."""

from tests.scheduler.conftest import core, drs_sa_kubeconfig, make_scheduler, ns

__all__ = ["core", "drs_sa_kubeconfig", "make_scheduler", "ns"]
