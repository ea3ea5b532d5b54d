"""``drs-prom rebalance``: the live rebalancer, a Deployment of its own beside the scheduler.

Every ``rebalance.interval_seconds`` it reads the nodes' signals over a window and the pods' stored usage from
Prometheus (``reads``), the nodes, pods and PodDisruptionBudgets from the apiserver (``cluster``), asks
drs_prom.moves which pods to move (the same decisions the simulator runs), and evicts them through the Eviction API
(``actions``: PDBs hold, a 429 is respected, an Event on every pod moved), or in ``dry-run`` only logs, counts and
journals them. ``loop`` runs the rounds, the guardrails that stop it, its journal and its /metrics (``metrics``).
"""
