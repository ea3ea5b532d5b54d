"""The scheduler's view of the cluster: Kubernetes JSON parsed into plain records (kube, kube_terms, kube_storage),
the list+watch cache with assumed pods, the node table the filters read as arrays, and the pending-pod queue.
"""
