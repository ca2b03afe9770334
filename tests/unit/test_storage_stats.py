"""The storage's bucketed distributions: many observations at once count as one by one."""

from __future__ import annotations

import random

from services.pump.storage.stats import DURATION_BUCKETS, SIZE_BUCKETS, Distribution


def test_observe_many_counts_as_observing_each_value() -> None:
    rng = random.Random(7)
    for bounds in (SIZE_BUCKETS, DURATION_BUCKETS):
        values = [rng.choice(bounds) for _ in range(50)]  # on a bound: the bucket at or above
        values += [rng.uniform(0, bounds[-1] * 2) for _ in range(500)]  # past the last one too
        one, many = Distribution(bounds), Distribution(bounds)
        for v in values:
            one.observe(v)
        many.observe_many(values[:100])
        many.observe_many(values[100:])
        many.observe_many([])
        assert (many.count, many.counts) == (one.count, one.counts)
        assert abs(many.total - one.total) <= 1e-9 * one.total
        assert many.counts[-1] > 0 and many.count == len(values)
