"""The cluster simulator: seeded, event-driven, fed to policies through the production state path.

- ``scenario``  YAML scenarios (packaged under ``scenarios/``): node types, pod profiles, arrivals.
- ``workload``  the seeded arrival sequence of one episode (identical for every policy).
- ``cluster``   node capacities, running pods, contention slowdown, exact load integrals.
- ``source``    ``SimSource``: a ``state.MetricsSource`` over the simulated cluster.
- ``env``       ``SchedulingEnv``: reset/step per pod decision, ``run(policy)`` per episode.
- ``step_reward`` a settled step as the reward's Outcome (drs_prom.outcomes.reward), as retraining rebuilds it from history.
- ``bench``     ``drs-prom bench`` / ``demo``; ``bench_results`` holds its results, ``bench_plots`` draws its PNGs;
                reference runs that read the future (not policies) are registered from outside the package;
                ``bench_command`` runs the command's modes (a scenario, the suite, a trace replay).
- ``live_cluster`` a simulated cluster on the wall clock, scraped by a real Prometheus (exporters/ exposition).
- ``retrain_checks`` the simulator's part of a retraining run (replay, gate score), injected by retrain_job.

The simulator sits above drs_prom.retrain, drs_prom.registry and drs_prom.agent, and below
drs_prom.training, which drives it.
"""
