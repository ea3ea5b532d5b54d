"""The live scheduler: watches the apiserver, filters, asks a policy, binds.

Layers, each its own module: kube (API JSON -> plain records), cache (watched nodes
and pods), queue (priority FIFO with backoff), pod_features (expected pod load),
bind (Binding + events), leader (Lease election), metrics (/metrics, /healthz,
/readyz), loop (the scheduling loop tying them together), extender (HTTP extender).
Everything reads the API as plain JSON dicts, not client model objects: that is both
faster and keeps the conversion code one small, testable module.
"""
