"""Bands: how far apart two measurements of one calibration loss can be through rounding alone.

A band belongs to a pair of *numeric classes* (:func:`numeric_class`: the precision and the class of
kernel that ran it, e.g. ``bf16/amx`` against ``fp32/cpu-avx2``), to an objective (ppl's losses are
token NLLs around 1-4 nats, margin's are sums of log-prob differences around 0: one absolute band
would fit neither), to a model (rounding moves a 30-block model's loss more than a 16-block one's)
and to the size of the removed set (rounding moves a loss with five blocks removed more than one with
one). It is in nats, absolute.

Bands are measured, never guessed (:func:`measure`), on *measuring sets* that verification never
checks (rule 2, written down on 2026-12-03 before its first run, after rule 1's run on the tiny grid
showed bands measured on the dense model and the singles alone too narrow for sets of 3-5 blocks):

* per condition (model, objective, recorded parameters): the dense model (size 0), every single
  removal (size 1: the prior, which calibration re-scores anyway), and for every size k >= 2 of the
  condition's traces ``HELD_OUT`` recorded sets of size k drawn with a generator seeded by the seed and
  the condition, from the trace sets that are no cell's removed set and no decision's set; the
  checks' own trace sample is drawn from the others (:func:`depthprune.verify.remeasure.held_out`);
* the band of (pair, objective, model, size) is ``FACTOR`` times the largest ``|recorded - here|`` of its
  measuring sets; a set of a size without a band takes the widest band of its pair, objective and model,
  flagged.

The table (``bands.json`` beside this file) is written by ``depthprune verify --measure-bands``; each
band names its measurement, and the table keeps each measurement's command, commit, machine and cells
once (``measurements``). It also holds the evaluation bands (:mod:`depthprune.verify.evaluation`). Where a pair, objective
and model has no measured band, :func:`lookup` takes the widest band measured for the same precision
pair (bf16 against fp32, say) and flags it; where the precision pair has none, there is no band and
the cell is NOT VERIFIED, never passed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.precision import bf16_class

BANDS_FILE = Path(__file__).with_name("bands.json")
#: a band is this many times the largest difference measured on its measuring sets (fixed beforehand)
FACTOR = 2.0
#: measuring sets per condition and set size >= 2 (rule 2, module docstring)
HELD_OUT = 8
#: the rule the table's bands were measured by (module docstring)
RULE = 2
#: the rule of the table's evaluation bands (:mod:`depthprune.verify.evaluation`)
EVAL_RULE = "E1"


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
    """The band for one check, and whether it was measured for exactly this pair, objective, model and size."""

    pair: str
    objective: str
    model: str
    size: int
    nats: float
    measured_for: str  # "pair | objective | model | size" it was measured for
    flagged: str | None = None  # why a band measured for something else stands in

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair, "objective": self.objective, "model": self.model, "size": self.size,
                "nats": self.nats, "measured_for": self.measured_for, "flagged": self.flagged}


def load_table(path: str | Path = BANDS_FILE) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        return {"rule": RULE, "bands": []}
    table = json.loads(path.read_text())
    if table.get("rule") != RULE:  # a table of another rule is not this rule's measurement
        return {"rule": RULE, "bands": []}
    if table.get("evaluation_rule") != EVAL_RULE:  # evaluation bands of another rule are not this rule's
        table = {**table, "evaluation": []}
    return table


def _name(row: Mapping[str, Any]) -> str:
    return f"{row['pair']} | {row['objective']} | {row['model']} | size {row['size']}"


def lookup(table: Mapping[str, Any], recorded: str, here: str, objective: str, model: str, size: int) -> Band | None:
    """The band for a set of ``size`` blocks, a recorded class against this machine's (module docstring),
    or None where none is measured for the precision pair."""
    key = pair_key(recorded, here)
    rows = [r for r in table.get("bands", []) if r["objective"] == objective]
    mine = [r for r in rows if r["pair"] == key and r["model"] == model]
    for row in mine:
        if row["size"] == size:
            return Band(key, objective, model, size, row["nats"], _name(row))
    if mine:
        widest = max(mine, key=lambda r: r["nats"])
        return Band(key, objective, model, size, widest["nats"], _name(widest),
                    flagged=f"no band measured for sets of {size} blocks: the widest of {key}, {objective}, "
                            f"{model} ({_name(widest)}) stands in")
    same = [r for r in rows if precision_pair(r["pair"]) == precision_pair(key)]
    if not same:
        return None
    widest = max(same, key=lambda r: r["nats"])
    return Band(key, objective, model, size, widest["nats"], _name(widest),
                flagged=f"no band measured for {key}, {objective}, {model}: the widest measured for "
                        f"{precision_pair(key)} ({_name(widest)}) stands in")


def measure(differences: Iterable[tuple[str, str, str, int, float]], provenance: Mapping[str, Any],
            table: Mapping[str, Any] | None = None,
            evaluation: Iterable[tuple[str, str, int, float, dict[str, float]]] = ()) -> dict[str, Any]:
    """A new table: ``table`` with a band per (pair, objective, model, size) of ``differences`` (pair,
    objective, model, set size, ``|recorded - here|`` in nats) replaced by ``FACTOR`` times the largest,
    and the evaluation bands of ``evaluation`` (:func:`depthprune.verify.bands.measure_rows`) replaced
    per (pair, model, fold). Each row names its measurement; ``provenance`` is kept once under that name."""
    old = table or {}
    measurements = dict(old.get("measurements", {}))
    same = [k for k, v in measurements.items() if v == dict(provenance)]  # one run measures model by model
    name = same[0] if same else f"m{1 + max((int(k[1:]) for k in measurements if k[1:].isdigit()), default=0)}"
    measurements[name] = dict(provenance)
    largest: dict[tuple[str, str, str, int], tuple[float, int]] = {}
    for pair, objective, model, size, diff in differences:
        if not math.isfinite(diff):
            continue
        top, n = largest.get((pair, objective, model, size), (0.0, 0))
        largest[pair, objective, model, size] = (max(top, diff), n + 1)
    rows = [r for r in old.get("bands", []) if (r["pair"], r["objective"], r["model"], r["size"]) not in largest]
    for (pair, objective, model, size), (top, n) in largest.items():
        rows.append({"pair": pair, "objective": objective, "model": model, "size": size, "nats": FACTOR * top,
                     "largest_difference": top, "sets": n, "factor": FACTOR, "measured_by": name})
    rows.sort(key=lambda r: (r["pair"], r["objective"], r["model"], r["size"]))
    new_eval = [{**row, "measured_by": name} for row in measure_rows(list(evaluation))]
    keys = {(r["pair"], r["model"], r["fold"]) for r in new_eval}
    eval_rows = [r for r in old.get("evaluation", []) if (r["pair"], r["model"], r["fold"]) not in keys] + new_eval
    eval_rows.sort(key=lambda r: (r["pair"], r["model"], r["fold"]))
    used = {r["measured_by"] for r in rows + eval_rows if isinstance(r.get("measured_by"), str)}
    return {"about": "depthprune.verify.bands: rounding bands of calibration losses, in nats, per pair of numeric "
                     "classes, objective, model and removed-set size, measured on sets verification never checks; "
                     "and evaluation bands (depthprune.verify.evaluation: item disagreement rate, window NLL) per "
                     "pair, model and fold; written by depthprune verify --measure-bands, never by hand",
            "rule": RULE, "evaluation_rule": EVAL_RULE, "bands": rows, "evaluation": eval_rows,
            "measurements": {k: v for k, v in sorted(measurements.items()) if k in used}}


def measure_rows(rows: Sequence[tuple[str, str, int, float, dict[str, float]]]) -> list[dict[str, Any]]:
    """Band rows from measurements (pair, model, fold, disagreement rate, dataset -> largest window
    difference), one per (pair, model, fold): ``FACTOR`` times the largest of each."""
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for pair, model, f, rate, windows in rows:
        row = out.setdefault((pair, model, f), {"pair": pair, "model": model, "fold": f, "largest_rate": 0.0,
                                                "largest_window_difference": {}, "sets": 0})
        row["largest_rate"] = max(row["largest_rate"], rate)
        row["sets"] += 1
        for name, diff in windows.items():
            row["largest_window_difference"][name] = max(row["largest_window_difference"].get(name, 0.0), diff)
    for row in out.values():
        row["rate"] = FACTOR * row["largest_rate"]
        row["windows"] = {k: FACTOR * v for k, v in sorted(row["largest_window_difference"].items())}
        row["factor"] = FACTOR
    return sorted(out.values(), key=lambda r: (r["pair"], r["model"], r["fold"]))
