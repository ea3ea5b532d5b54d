"""Scheduling queue: priority then FIFO, backoff (never dropped), requeue on cluster change, delete."""

from drs_prom.scheduler.watch.queue import SchedulingQueue


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def pod(uid, prio=0):
    return {"metadata": {"uid": uid, "name": uid, "namespace": "ns"}, "spec": {"priority": prio}}


def test_priority_then_fifo():
    q = SchedulingQueue()
    for uid, prio in [("a", 0), ("b", 10), ("c", 0), ("d", 10)]:
        q.add(pod(uid, prio))
    assert [q.pop(0).uid for _ in range(4)] == ["b", "d", "a", "c"]
    assert q.pop(timeout=0.01) is None


def test_backoff_doubles_and_pod_is_retried():
    clock = Clock()
    q = SchedulingQueue(backoff_initial=1.0, backoff_max=4.0, clock=clock)
    q.add(pod("a"))
    delays = []
    item = q.pop(0)
    for _ in range(4):
        assert item is not None and item.uid == "a"
        start = clock.t
        q.done(item, scheduled=False)
        assert q.pop(timeout=0) is None  # waiting, not dropped
        while (item := q.pop(timeout=0)) is None:
            clock.t += 0.25
        delays.append(clock.t - start)
    assert delays == [1.0, 2.0, 4.0, 4.0]  # capped


def test_cluster_change_shortens_wait_and_delete_removes():
    clock = Clock()
    q = SchedulingQueue(backoff_initial=1.0, backoff_max=60.0, clock=clock)
    q.add(pod("a"))
    for _ in range(5):  # long backoff
        item = q.pop(0)
        q.done(item, scheduled=False)
        clock.t += 100
    item = q.pop(0)
    q.done(item, scheduled=False)  # now waiting 32 s
    clock.t += 2
    assert q.pop(timeout=0) is None
    q.move_all()
    assert q.pop(timeout=0).uid == "a"
    q.done(item, scheduled=True)
    assert "a" not in q and len(q) == 0
    q.add(pod("b"))
    q.delete("b")
    assert q.pop(timeout=0) is None


def test_deleted_while_in_flight_is_forgotten():
    q = SchedulingQueue()
    q.add(pod("a"))
    item = q.pop(0)
    q.delete("a")
    q.done(item, scheduled=False)
    assert len(q) == 0 and q.pop(timeout=0) is None


def test_update_while_in_flight_does_not_duplicate():
    q = SchedulingQueue()
    q.add(pod("a"))
    item = q.pop(0)
    q.add(pod("a", prio=5))
    assert q.pop(timeout=0) is None
    q.done(item, scheduled=True)
    assert len(q) == 0
