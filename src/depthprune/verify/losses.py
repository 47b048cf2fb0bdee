"""Every set two runs share, each loss against its band: the one comparison behind both checks of a cell.

A cell is checked across numeric classes in two places: the grid (:mod:`depthprune.verify.forks`: the cell run
here, search and all, against its reference's archived run) and ``depthprune verify``
(:mod:`depthprune.verify.remeasure`: the archived run's sets re-scored here). Both compare every set the two
runs share (the dense model, the singles of the prior, every set of the trace and the removed set) with the
same bands (rule 5 of :mod:`depthprune.verify.bands`: a set's band scales with its distance from the dense
loss, measured on the other fold), through :func:`compare_losses`, so one cell gets one verdict on its losses
whichever check is run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from depthprune.results.schema import Result
from depthprune.verify.bands import Band
from depthprune.verify.replay import recorded_loss, recorded_trace

#: the band of a set, given the set and its recorded loss (None: no band measured for it)
BandFor = Callable[[frozenset[int], float], "Band | None"]


def run_losses(result: Result) -> dict[frozenset[int], float]:
    """Every loss a run recorded: the dense model (the empty set), the singles of its prior, its trace and its
    removed set."""
    out: dict[frozenset[int], float] = {frozenset(): float(result["dense_calibration_loss"])}
    for i, v in enumerate(result.get("prior") or []):
        out[frozenset([i])] = recorded_loss(v)
    out.update(recorded_trace(result))
    out.setdefault(frozenset(result["removed"]), float(result["calibration_loss"]))
    return out


def set_order(s: frozenset[int]) -> tuple[int, list[int]]:
    """Sets by size, then by their blocks: the dense model first, then the singles."""
    return len(s), sorted(s)


@dataclass
class LossCheck:
    """The shared sets' losses against their bands.

    Where it does not pass: ``failure`` says the first set outside its band (``failed`` lists them all), or
    ``no_band`` a set with none (rounding cannot be told from a change there)."""

    sets_compared: int = 0
    largest_difference: float = 0.0
    largest_z: float | None = None  # the largest |difference| / s_up (rules 4 and 5)
    failure: str | None = None
    no_band: str | None = None
    failed: list[frozenset[int]] = field(default_factory=list)


def compare_losses(recorded: Mapping[frozenset[int], float], here: Mapping[frozenset[int], float],
                   band_for: BandFor) -> LossCheck:
    """Every set of both ``recorded`` and ``here``, in :func:`set_order`, against its band.

    The band is ``band_for(the set, its recorded loss)``; a loss that is not finite agrees only with one
    that is not finite either."""
    check = LossCheck()
    for s in sorted(set(recorded) & set(here), key=set_order):
        was, now = recorded[s], here[s]
        check.sets_compared += 1
        if not math.isfinite(was):
            if math.isfinite(now):
                check.failed.append(s)
                check.failure = check.failure or f"set {sorted(s)}: recorded loss {was}, here {now:.6g}"
            continue
        band = band_for(s, was)
        if band is None:
            check.no_band = check.no_band or f"set {sorted(s)}: no band (recorded loss {was:.6g})"
            continue
        diff = abs(now - was) if math.isfinite(now) else math.inf
        check.largest_difference = max(check.largest_difference, diff)
        z = band.z(diff)
        if z is not None:
            check.largest_z = max(check.largest_z or 0.0, z)
        if not diff <= band.nats:
            check.failed.append(s)
        if not diff <= band.nats and check.failure is None:
            check.failure = (f"set {sorted(s)}: recorded loss {was:.6g}, here {now:.6g}, |difference| {diff:.3g} > "
                             f"band {band.nats:.3g} nats, {diff / band.nats:.2f}x it"
                             + ("" if z is None else f", z {z:.1f}")
                             + ("" if band.weight is None else f", weight {band.weight:.3g}")
                             + f" ({band.measured_for})")
    return check
