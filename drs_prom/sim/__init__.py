"""The cluster simulator: seeded, event-driven, fed to policies through the production state path.

- ``scenario``  YAML scenarios (packaged under ``scenarios/``): node types, pod profiles, arrivals.
- ``workload``  the seeded arrival sequence of one episode (identical for every policy).
- ``cluster``   node capacities, running pods, contention slowdown, exact load integrals.
- ``source``    ``SimSource``: a ``state.MetricsSource`` over the simulated cluster.
- ``env``       ``SchedulingEnv``: reset/step per pod decision, ``run(policy)`` per episode.
- ``bench``     ``drs-prom bench`` / ``demo``; ``plot`` draws its PNG.
- ``serve``     a simulated cluster on the wall clock, scraped by a real Prometheus.
"""
