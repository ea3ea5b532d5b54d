"""One decision: the pod's expected load, the node state, the rollout's arms and guardrails, the policy's choice,
and preemption when nothing fits.
"""
