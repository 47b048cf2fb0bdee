"""95% intervals of the accuracies REPORT.md shows, from the per-item outcomes a result stores.

An accuracy on 200-1,200 items is a sample mean whose noise (several points) is as large as
many of the differences the report discusses, so no accuracy is shown without its interval.
The interval is a cluster bootstrap of the result's own items (:func:`depthprune.report.noise.bootstrap`:
items of one source unit are resampled together), percentile, seeded: the same results give
the same intervals. Where no per-item outcomes exist (a model card's summary), or a task's items
are all right or all wrong (no resample can move its mean), a Wilson interval from the item count
stands in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from depthprune.report import noise

N_RESAMPLES = 1000
SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """An accuracy (0..1) and its interval."""

    value: float
    low: float
    high: float

    def points(self, digits: int = 1) -> str:
        """In percentage points, as REPORT's tables write accuracies: ``66.4 [60.5, 72.0]``."""
        return f"{100 * self.value:.{digits}f} [{100 * self.low:.{digits}f}, {100 * self.high:.{digits}f}]"


def accuracy(result: Mapping[str, Any], tasks: Sequence[str], headline: Callable[[str], str],
             value: float | None = None, n_resamples: int = N_RESAMPLES, seed: int = SEED,
             confidence: float = CONFIDENCE) -> Interval | None:
    """The mean over ``tasks`` of the headline accuracy (tasks weigh equally, as ``avg_acc``), with
    a cluster-bootstrap interval over the result's items. ``value``: the stored metric to show
    (the outcomes' own mean where None). None without per-item outcomes for every task."""
    blocks = noise.accuracy_blocks([result], list(tasks), headline)
    if blocks is None:
        return None
    mean = float(noise.measure(blocks)[0][0]) if value is None else float(value)
    if len(blocks) == 1 and np.ptp(blocks[0].totals / blocks[0].counts[:, None]) == 0:
        # every item right (or wrong): resampling cannot move the mean, Wilson's interval still can
        w = wilson(float(noise.measure(blocks)[0][0]), blocks[0].n_units, confidence)
        return Interval(mean, w.low, w.high)
    [(draws, _)] = noise.bootstrap(blocks, n_resamples, seed)
    tail = (1 - confidence) / 2
    low, high = np.quantile(draws[:, 0], [tail, 1 - tail])
    return Interval(mean, float(low), float(high))


def wilson(p: float, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval of a proportion ``p`` on ``n`` independent items."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return Interval(p, centre - half, centre + half)
