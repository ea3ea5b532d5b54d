"""Client-side write limits: client-go's token bucket, and kube-scheduler's split of binds from events."""

from __future__ import annotations

from drs_prom.scheduler.write.write_limits import TokenBucket, WriteLimits


class FakeClock:
    """Time that moves only when the test says: the bucket's arithmetic, not the host's speed."""

    def __init__(self) -> None:
        self.now = 64.0

    def __call__(self) -> float:
        return self.now


def test_burst_goes_at_once_then_qps_per_second() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=4, burst=3, clock=clock)  # quarters of a second: exact in binary
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.reserve() == 0.25  # the 4th waits for one token at 4 per second
    assert bucket.reserve() == 0.5
    clock.now += 0.75  # the two reserved tokens have arrived, and one more
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == 0.25


def test_refill_stops_at_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=2, clock=clock)
    clock.now += 60
    assert [bucket.reserve() for _ in range(2)] == [0.0, 0.0]
    assert bucket.reserve() > 0


def test_zero_qps_is_no_limit() -> None:
    bucket = TokenBucket(qps=0, burst=1, clock=FakeClock())
    assert all(bucket.reserve() == 0.0 for _ in range(1000))


def test_events_never_take_a_binds_token() -> None:
    """kube-scheduler's event client is a second clientset with its own bucket: a pod's Scheduled event must not
    halve the bind rate of a burst."""
    clock = FakeClock()
    limits = WriteLimits(qps=64, burst=100, clock=clock)
    for _ in range(100):
        assert limits.binds.reserve() == 0.0
        assert limits.events.reserve() == 0.0
    assert limits.binds.reserve() == 1 / 64  # the 101st bind waits 1/qps, whatever the events took
    assert limits.events.reserve() == 1 / 64
