"""What the bench scripts share: one call timed many times, as a median and a 95th percentile
in microseconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(
    fn: Callable[[int], object], calls: int, before: Callable[[int], None] | None = None
) -> dict:
    """`fn(i)` for i in range(calls), each timed on its own; `before(i)` runs untimed first."""
    samples = []
    for i in range(calls):
        if before:
            before(i)
        t0 = time.perf_counter_ns()
        fn(i)
        samples.append((time.perf_counter_ns() - t0) / 1000)
    samples.sort()
    return {
        "median_us": statistics.median(samples),
        "p95_us": samples[min(len(samples) - 1, int(len(samples) * 0.95))],
        "calls": calls,
    }
