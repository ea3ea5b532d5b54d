"""What the scheduler knows of the cluster's load: the PromQL it sends, the one Prometheus client, the node state
matrix built from the answers, and each node's link and disk capacity.
"""
