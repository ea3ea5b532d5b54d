"""The live scheduler: watches the apiserver, filters, asks a policy, binds.

By stage, each a package: ``watch`` (API JSON -> plain records, the list+watch cache with assumed pods, the node
table, the pending-pod queue), ``decision`` (the pod's expected load, node state refresh, model, fallback rules,
arms and guardrails, preemption), ``write`` (Bindings, events and pod conditions, volume pre-binding, rate limits,
the bind workers and the child process that makes the writes off the GIL) and ``http`` (/metrics, /healthz,
/readyz, TLS and delegated authentication, the kube-scheduler HTTP extender). At the top: ``loop`` (the scheduling
loop), ``leader`` (Lease election), ``metrics`` (the metric families), ``gc_pauses`` (GC pause timing, frozen
start-up heap), ``feasibility`` (the filters from the API's objects alone, for the differential tests) and
``runner`` (wiring for the CLI). Everything reads the API as plain JSON dicts, not client model objects: faster,
and the conversion stays in one small, testable module.
"""
