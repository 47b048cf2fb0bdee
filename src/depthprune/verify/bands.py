"""Bands: how far apart two measurements of one calibration loss can be through rounding alone.

A band belongs to a pair of *numeric classes* (:func:`numeric_class`: the precision and the class of
kernel that ran it, e.g. ``bf16/amx`` against ``fp32/cpu-avx2``), to an objective (ppl's losses are
token NLLs around 1-4 nats, margin's are sums of log-prob differences around 0: one absolute band
would fit neither) and to a model (rounding moves a 30-block model's loss more than a 16-block
one's). It is in nats, absolute.

Bands are measured, never guessed (:func:`measure`): a verification run re-scores every condition's
dense model and single-removal prior on this machine (the calibration builds them anyway) and
compares them with the recorded ones; the band is ``FACTOR`` times the largest difference seen
there. Those sets only measure: the sets verification checks (removed sets, decisions, samples of
the trace) are others. The rule (``FACTOR = 2``, the sets it is measured on) was fixed before any
band was measured. The table (``bands.json`` beside this file) is written by
``depthprune verify --measure-bands`` and keeps, per band, the command, commit, machine and cells
that measured it.

Where a pair, objective and model has no measured band, :func:`lookup` takes the widest band measured
for the same precision pair (bf16 against fp32, say) and flags it; where the precision pair has none,
there is no band and the cell is NOT VERIFIED, never passed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.precision import bf16_class

BANDS_FILE = Path(__file__).with_name("bands.json")
#: a band is this many times the largest difference measured on its measuring sets (fixed beforehand)
FACTOR = 2.0


def numeric_class(environment: Mapping[str, Any]) -> str:
    """``<precision>/<kernel class>`` of a result's or this machine's environment record."""
    dtype = str(environment.get("dtype", "")).removeprefix("torch.")
    precision = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}.get(dtype, dtype or "unknown")
    if str(environment.get("device", "cpu")).startswith("cuda"):
        return f"{precision}/cuda"
    kernels = environment.get("kernels") or {}
    if precision == "bf16":
        return f"bf16/{bf16_class(kernels.get('bf16_matmul_kernel'))}"
    return f"{precision}/cpu-{str(kernels.get('capability') or 'unknown').lower()}"


def pair_key(a: str, b: str) -> str:
    return " | ".join(sorted((a, b)))


def precision_pair(key: str) -> str:
    return " | ".join(sorted(side.split("/")[0] for side in key.split(" | ")))


@dataclass(frozen=True)
class Band:
    """The band for one check, and whether it was measured for exactly this pair, objective and model."""

    pair: str
    objective: str
    model: str
    nats: float
    measured_for: str  # "pair | objective | model" it was measured for
    flagged: str | None = None  # why a band measured for something else stands in

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair, "objective": self.objective, "model": self.model, "nats": self.nats,
                "measured_for": self.measured_for, "flagged": self.flagged}


def load_table(path: str | Path = BANDS_FILE) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        return {"bands": []}
    return json.loads(path.read_text())


def lookup(table: Mapping[str, Any], recorded: str, here: str, objective: str, model: str) -> Band | None:
    """The band for a recorded class against this machine's (module docstring), or None where none is measured."""
    key = pair_key(recorded, here)
    rows = table.get("bands", [])
    for row in rows:
        if row["pair"] == key and row["objective"] == objective and row["model"] == model:
            return Band(key, objective, model, row["nats"], f"{row['pair']} | {objective} | {model}")
    same = [r for r in rows if precision_pair(r["pair"]) == precision_pair(key) and r["objective"] == objective]
    if not same:
        return None
    widest = max(same, key=lambda r: r["nats"])
    return Band(key, objective, model, widest["nats"], f"{widest['pair']} | {objective} | {widest['model']}",
                flagged=f"no band measured for {key}, {objective}, {model}: the widest measured for "
                        f"{precision_pair(key)} ({widest['pair']}, {widest['model']}) stands in")


def measure(differences: Iterable[tuple[str, str, str, float]], provenance: Mapping[str, Any],
            table: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A new table: ``table`` with a band per (pair, objective, model) of ``differences`` (pair, objective,
    model, |recorded - here| in nats) replaced by ``FACTOR`` times the largest, with ``provenance``."""
    largest: dict[tuple[str, str, str], tuple[float, int]] = {}
    for pair, objective, model, diff in differences:
        if not math.isfinite(diff):
            continue
        top, n = largest.get((pair, objective, model), (0.0, 0))
        largest[pair, objective, model] = (max(top, diff), n + 1)
    rows = [r for r in (table or {}).get("bands", []) if (r["pair"], r["objective"], r["model"]) not in largest]
    for (pair, objective, model), (top, n) in largest.items():
        rows.append({"pair": pair, "objective": objective, "model": model, "nats": FACTOR * top,
                     "largest_difference": top, "sets": n, "factor": FACTOR, "measured_by": dict(provenance)})
    rows.sort(key=lambda r: (r["pair"], r["objective"], r["model"]))
    return {"about": "depthprune.verify.bands: rounding bands of calibration losses, in nats, measured on "
                     "each condition's dense model and single-removal prior; written by depthprune verify "
                     "--measure-bands, never by hand", "bands": rows}
