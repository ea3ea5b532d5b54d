"""The live scheduler: watches the apiserver, filters, asks a policy, binds.

Layers, each its own module: kube (API JSON -> plain records), cache (list+watch of
nodes and pods, assumed pods), queue (priority FIFO with backoff), pod_features
(expected pod load), decide (node state refresh, model, fallback rules), bind (Binding
+ events), write_process and write_child (those writes made by a child process, off the
GIL), leader (Lease election), metrics (/metrics, /healthz, /readyz), gc_pauses (GC pause
timing, frozen start-up heap), loop (the scheduling loop), extender (kube-scheduler HTTP
extender), runner (wiring for the CLI). Everything reads the API as
plain JSON dicts, not client model objects: faster, and the conversion stays in one
small, testable module.
"""
