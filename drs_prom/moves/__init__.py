"""Which pods to move, and where their replacements would go: the rebalancer's decisions as pure functions.

``hot`` says which nodes have been hot for a sustained window (quantiles over the window against each node's own
capacity, with hysteresis), ``eligibility`` which pods may be moved at all (kube's own controllers' rules), ``plan``
which pod of each hot node to move, within the budgets and the owners' cool-down, once the filters and the policy of
the pod's scheduler say its replacement would land on a clearly better node. The live rebalancer
(drs_prom.rebalance) and the simulator (drs_prom.sim.rebalancer) feed them what they read and act on what they return:
one implementation of the decision. Pure: arrays and records in, a plan out.
"""
