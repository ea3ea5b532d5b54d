"""What a pending pod will use, learned from the stored series: the estimator every policy is told by.

A real cluster tells the scheduler a pod's requests, limits and owner, never its usage. Prometheus holds the
usage of every pod that ran (the kubelet's cAdvisor series, by namespace, pod and container), and a new pod's
owner has usually run pods like it before. ``estimator`` turns that history into the pod's expected load on the
six signals, with the source it came from; ``history`` is the contract of the stored series it reads (the live
scheduler's Prometheus, the simulator's own records: one estimator for both); ``anchors`` are the field's
estimators it is measured against; ``fit`` learns the estimator's parameters from a cluster's history; ``owners``
finds a pod's top owner and the names its owner gives its pods, from the pod alone.
Pure: arrays in, estimates out.
"""
