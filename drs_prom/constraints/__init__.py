"""Which nodes may take a pod: kube-scheduler's filters, its preemption and the score terms every policy shares.

Pure functions on the plain records of ``drs_prom.types``: the simulator, the live scheduler, the extender and the
differential tests against kube-scheduler all run them.
"""
