"""The latency harness: warm-up items are run but not counted; median and p90 of the rest."""

import pytest

from nmtbench.evaluation.latency import per_item_ms, summarize


class FakeClock:
    """A clock that each timed call advances by the duration it is given (seconds)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def take(self, seconds):
        def call(_item):
            self.now += seconds(_item)
        return call


def test_warmup_items_are_run_but_not_counted():
    clock = FakeClock()
    seen = []
    durations = [9.0, 9.0, 0.010, 0.030, 0.020]  # two slow warm-up items, then 10/30/20 ms

    def call(i):
        seen.append(i)
        clock.now += durations[i]

    (times,) = per_item_ms([call], list(range(5)), warmup=2, clock=clock)
    assert seen == [0, 1, 2, 3, 4]
    assert times == pytest.approx([10.0, 30.0, 20.0])
    assert summarize(times)["median"] == pytest.approx(20.0)


def test_two_models_alternate_and_are_timed_apart():
    clock = FakeClock()
    order = []
    fast = clock.take(lambda i: 0.005)
    slow = clock.take(lambda i: 0.020)

    def a(i):
        order.append(("a", i))
        fast(i)

    def b(i):
        order.append(("b", i))
        slow(i)

    times = per_item_ms([a, b], [0, 1, 2, 3], warmup=1, clock=clock)
    assert order == [("a", 0), ("b", 0), ("b", 1), ("a", 1), ("a", 2), ("b", 2), ("b", 3),
                     ("a", 3)]  # who goes first alternates, so drift hits both alike
    assert times[0] == pytest.approx([5.0] * 3) and times[1] == pytest.approx([20.0] * 3)


def test_summary_is_median_and_inclusive_p90():
    times = [float(t) for t in range(1, 11)]  # 1..10 ms
    assert summarize(times) == pytest.approx({"median": 5.5, "p90": 9.1})
    assert summarize([7.0]) == {"median": 7.0, "p90": 7.0}
    with pytest.raises(ValueError):
        summarize([])
