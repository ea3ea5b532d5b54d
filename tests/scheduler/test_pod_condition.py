"""The PodScheduled=False patch: written when the condition changes, not on a retry that would say the same."""

from __future__ import annotations

from drs_prom.scheduler.write.pod_condition import SCHEDULER_ERROR, UNSCHEDULABLE, not_scheduled_patch

T0 = 1_700_000_000.0
MSG = "0/3 nodes are available: 3 Insufficient cpu."


def with_condition(**cond: str) -> dict:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "status": {"conditions": [{"type": "Initialized", "status": "True"}, {"type": "PodScheduled", **cond}]},
    }


def written(patch: dict | None) -> dict:
    assert patch is not None
    (cond,) = patch["status"]["conditions"]  # only PodScheduled: strategic merge keeps the others
    return cond


def test_a_pod_without_the_condition_gets_it_from_now() -> None:
    cond = written(not_scheduled_patch({"metadata": {"name": "p"}}, UNSCHEDULABLE, MSG, T0))
    assert cond == {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": MSG,
        "lastTransitionTime": "2023-11-14T22:13:20Z",
    }


def test_the_same_condition_again_writes_nothing() -> None:
    pod = with_condition(status="False", reason=UNSCHEDULABLE, message=MSG, lastTransitionTime="2023-11-14T22:13:20Z")
    assert not_scheduled_patch(pod, UNSCHEDULABLE, MSG, T0 + 60) is None


def test_a_new_message_or_reason_keeps_the_transition_time() -> None:
    pod = with_condition(status="False", reason=UNSCHEDULABLE, message=MSG, lastTransitionTime="2023-11-14T22:13:20Z")
    cond = written(not_scheduled_patch(pod, UNSCHEDULABLE, "0/3 nodes are available: 3 Insufficient memory.", T0 + 60))
    assert cond["lastTransitionTime"] == "2023-11-14T22:13:20Z" and cond["message"].endswith("Insufficient memory.")
    cond = written(not_scheduled_patch(pod, SCHEDULER_ERROR, MSG, T0 + 60))
    assert cond["reason"] == "SchedulerError" and cond["lastTransitionTime"] == "2023-11-14T22:13:20Z"


def test_from_true_it_is_a_transition() -> None:
    pod = with_condition(status="True", lastTransitionTime="2023-11-14T22:00:00Z")
    cond = written(not_scheduled_patch(pod, UNSCHEDULABLE, MSG, T0))
    assert cond["status"] == "False" and cond["lastTransitionTime"] == "2023-11-14T22:13:20Z"
