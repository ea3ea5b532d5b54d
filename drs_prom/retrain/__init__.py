"""Retraining from what the cluster really did: journal + Prometheus history -> a gated new model.

- ``rebuild``: pure; journal rows + a NodeHistory -> transitions, skipped rows counted by reason;
- ``history``: the HistorySource protocol and the PromQL history query (-> NodeHistory);
- ``batch``: transitions -> the learner's arrays; ``candidate``: train a copy of the current model;
- ``gate``: candidate vs current, promote only if not worse by ``gate_margin``;
- ``metrics``: RetrainResult and the Prometheus metrics; ``run``: ``run_once``, the whole run as named steps.

The APScheduler wrapper (``drs_prom.ops.retrain_job``) never lets an exception out, so a
Prometheus outage during retraining cannot touch scheduling; it also injects the simulator
checks (drs_prom.sim.retrain_checks), which this package does not import.
"""
