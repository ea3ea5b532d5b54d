"""The filter plugins, one module each; the chain (drs_prom.constraints.chain) finds every module here.

Each module defines ``FILTER``, an instance of a drs_prom.constraints.framework.Filter subclass. Together they are
kube-scheduler's default profile: NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
the volume filters, PodTopologySpread and InterPodAffinity, plus DynamicResources' PreFilter, which turns away
the pods drs-prom cannot decide. A new filter is a new module here (docs/extending.md).
"""
