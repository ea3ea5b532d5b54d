"""Training orchestration in the simulator: the DQN loop, saving, learning curves, benchmark summaries.

- ``loop``: ``train(make_env, TrainConfig)`` for ``drs`` and ``drs-original`` (imitation warm start, greedy
  evaluation on held-out seeds, best-weights selection);
- ``run``: the ``drs-prom train`` command's body (env factory, save, plot, benchmark into the metadata);
- ``guided_run``: ``drs-prom train --learner guided``, the shipped heuristic-guided ``drs`` (models/drs-v7.keras);
- ``curves``, ``summary``: the learning curves and the benchmark summary;
- ``latency``: decision latency of a policy at several cluster sizes (``python -m drs_prom.training.latency``).

The learning pieces themselves (networks, DQN step, replay, features, persistence, inference policy)
are in drs_prom.agent; this package sits above drs_prom.sim, which it drives. Learners that did not ship are in
the research package outside this one (drs_prom_research).
"""
