"""Bands: how far apart two measurements of one calibration loss can be through rounding alone.

A band belongs to a pair of *numeric classes* (:func:`numeric_class`: the precision and the class of
kernel that ran it, e.g. ``bf16/amx`` against ``fp32/cpu-avx2``), to an objective (ppl's losses are
token NLLs around 1-4 nats, margin's are sums of log-prob differences around 0: one absolute band
would fit neither) and to a model (rounding moves a 30-block model's loss more than a 16-block one's).
A ppl band is relative: rounding grows with the loss, and a set that removes block 0 has a loss of 8
nats where the dense model's is 3.

Bands are measured, never guessed (:func:`measure`), on *measuring sets* that verification never
checks. Rule 3, written down on 2026-12-03 before it was built or run (rule 2 measured an absolute
band per set size and failed where rounding grows with the loss: docs/verify.md):

* per condition (model, objective, recorded parameters) the measuring sets are those of rule 2: the
  dense model, every single removal (the prior, which calibration re-scores anyway), and for every size
  k >= 2 of the condition's traces ``HELD_OUT`` recorded sets of size k drawn with a generator seeded by
  the seed and the condition, from the trace sets that are no cell's removed set and no decision's set
  (:func:`depthprune.verify.remeasure.held_out`); the band pools them all, whatever their size;
* *ppl* (a mean token NLL, positive): a set's band is ``FACTOR`` times the largest relative difference
  ``|recorded - here| / |recorded|`` over the measuring sets of its pair, objective and model, times the
  set's recorded loss (``kind = "relative"``);
* *margin* (a sum of log-prob differences that can sit near 0, while its rounding follows the log-probs'
  size, not the margin's): ``FACTOR`` times the largest ``|recorded - here|`` over the measuring sets, in
  nats, whatever the set (``kind = "absolute"``).

The table (``bands.json`` beside this file) is written by ``depthprune verify --measure-bands``; each
band names its measurement, and the table keeps each measurement's command, commit, machine and cells
once (``measurements``). It also holds the evaluation bands (:mod:`depthprune.verify.evaluation`). Where a pair, objective
and model has no measured band, :func:`lookup` takes the widest band measured for the same precision
pair (bf16 against fp32, say) and flags it; where the precision pair has none, there is no band and
the cell is NOT VERIFIED, never passed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.jsonio import read_json
from depthprune.precision import bf16_class

BANDS_FILE = Path(__file__).with_name("bands.json")
#: a band is this many times the largest difference measured on its measuring sets (fixed beforehand)
FACTOR = 2.0
#: measuring sets per condition and set size >= 2 (module docstring)
HELD_OUT = 8
#: the rule the table's bands were measured by (module docstring)
RULE = 3
#: the rule of the table's evaluation bands (:mod:`depthprune.verify.evaluation`)
EVAL_RULE = "E2"
#: how a band scales, per objective (module docstring): with the recorded loss, or not
KIND = {"ppl": "relative", "margin": "absolute"}


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
    """The band for one loss, and whether it was measured for exactly this pair, objective and model."""

    pair: str
    objective: str
    model: str
    loss: float  # the recorded loss it is the band of (a relative band scales with it)
    nats: float
    measured_for: str  # "pair | objective | model" it was measured for
    flagged: str | None = None  # why a band measured for something else stands in

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair, "objective": self.objective, "model": self.model, "loss": self.loss,
                "nats": self.nats, "measured_for": self.measured_for, "flagged": self.flagged}


def load_table(path: str | Path = BANDS_FILE) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        return {"rule": RULE, "bands": []}
    table = read_json(path)
    if table.get("rule") != RULE:  # a table of another rule is not this rule's measurement
        return {"rule": RULE, "bands": []}
    if table.get("evaluation_rule") != EVAL_RULE:  # evaluation bands of another rule are not this rule's
        table = {**table, "evaluation": []}
    return table


def _name(row: Mapping[str, Any]) -> str:
    return f"{row['pair']} | {row['objective']} | {row['model']}"


def _nats(row: Mapping[str, Any], loss: float) -> float:
    """The band of a set whose recorded loss is ``loss``, from its row (module docstring)."""
    return row["band"] * abs(loss) if row["kind"] == "relative" else row["band"]


def lookup(table: Mapping[str, Any], recorded: str, here: str, objective: str, model: str,
           loss: float) -> Band | None:
    """The band of a set whose recorded loss is ``loss``, a recorded class against this machine's
    (module docstring), or None where none is measured for the precision pair and objective."""
    key = pair_key(recorded, here)
    rows = [r for r in table.get("bands", []) if r["objective"] == objective]
    for row in rows:
        if row["pair"] == key and row["model"] == model:
            return Band(key, objective, model, loss, _nats(row, loss), _name(row))
    same = [r for r in rows if precision_pair(r["pair"]) == precision_pair(key)]
    if not same:
        return None
    widest = max(same, key=lambda r: r["band"])
    return Band(key, objective, model, loss, _nats(widest, loss), _name(widest),
                flagged=f"no band measured for {key}, {objective}, {model}: the widest measured for "
                        f"{precision_pair(key)} ({_name(widest)}) stands in")


#: one measuring set's difference: pair, objective, model, set size, recorded loss, loss here
Difference = tuple[str, str, str, int, float, float]


def measure(differences: Iterable[Difference], provenance: Mapping[str, Any],
            table: Mapping[str, Any] | None = None,
            evaluation: Iterable[tuple[str, str, int, float, dict[str, float]]] = ()) -> dict[str, Any]:
    """A new table: ``table`` with a band per (pair, objective, model) of ``differences`` replaced by
    ``FACTOR`` times the largest relative (ppl) or absolute (margin) difference of its measuring sets, and
    the evaluation bands of ``evaluation`` (:func:`depthprune.verify.bands.measure_rows`) replaced per
    (pair, model, fold). Each row names its measurement; ``provenance`` is kept once under that name."""
    old = table or {}
    measurements = dict(old.get("measurements", {}))
    same = [k for k, v in measurements.items() if v == dict(provenance)]  # one run measures model by model
    name = same[0] if same else f"m{1 + max((int(k[1:]) for k in measurements if k[1:].isdigit()), default=0)}"
    measurements[name] = dict(provenance)
    largest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for pair, objective, model, size, recorded, here in differences:
        if not (math.isfinite(recorded) and math.isfinite(here)):
            continue
        kind = KIND[objective]
        if kind == "relative" and recorded == 0:  # no relative difference of a zero loss
            continue
        diff = abs(recorded - here) / abs(recorded) if kind == "relative" else abs(recorded - here)
        row = largest.setdefault((pair, objective, model), {"largest": 0.0, "sets": 0, "sizes": {}, "at": None})
        if diff >= row["largest"]:
            row["largest"], row["at"] = diff, {"size": size, "recorded": recorded, "here": here}
        row["sets"] += 1
        row["sizes"][str(size)] = row["sizes"].get(str(size), 0) + 1
    rows = [r for r in old.get("bands", []) if (r["pair"], r["objective"], r["model"]) not in largest]
    for (pair, objective, model), m in largest.items():
        rows.append({"pair": pair, "objective": objective, "model": model, "kind": KIND[objective],
                     "band": FACTOR * m["largest"], "largest_difference": m["largest"], "largest_at": m["at"],
                     "sets": m["sets"], "sets_per_size": dict(sorted(m["sizes"].items(), key=lambda kv: int(kv[0]))),
                     "factor": FACTOR, "measured_by": name})
    rows.sort(key=lambda r: (r["pair"], r["objective"], r["model"]))
    new_eval = [{**row, "measured_by": name} for row in measure_rows(list(evaluation))]
    keys = {(r["pair"], r["model"], r["fold"]) for r in new_eval}
    eval_rows = [r for r in old.get("evaluation", []) if (r["pair"], r["model"], r["fold"]) not in keys] + new_eval
    eval_rows.sort(key=lambda r: (r["pair"], r["model"], r["fold"]))
    used = {r["measured_by"] for r in rows + eval_rows if isinstance(r.get("measured_by"), str)}
    return {"about": "depthprune.verify.bands: rounding bands of calibration losses per pair of numeric classes, "
                     "objective and model (ppl: relative to the recorded loss; margin: in nats), measured on sets "
                     "verification never checks; and evaluation bands (depthprune.verify.evaluation: item "
                     "disagreement rate, window NLL relative to the recorded one) per pair, model and fold; written "
                     "by depthprune verify --measure-bands, never by hand",
            "rule": RULE, "evaluation_rule": EVAL_RULE, "bands": rows, "evaluation": eval_rows,
            "measurements": {k: v for k, v in sorted(measurements.items()) if k in used}}


def measure_rows(rows: Sequence[tuple[str, str, int, float, dict[str, float]]]) -> list[dict[str, Any]]:
    """Band rows from measurements (pair, model, fold, disagreement rate, dataset -> largest relative window
    difference ``|recorded - here| / recorded``), one per (pair, model, fold): ``FACTOR`` times the largest of each."""
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for pair, model, f, rate, windows in rows:
        row = out.setdefault((pair, model, f), {"pair": pair, "model": model, "fold": f, "largest_rate": 0.0,
                                                "largest_window_relative_difference": {}, "sets": 0})
        row["largest_rate"] = max(row["largest_rate"], rate)
        row["sets"] += 1
        for name, diff in windows.items():
            largest = row["largest_window_relative_difference"]
            largest[name] = max(largest.get(name, 0.0), diff)
    for row in out.values():
        row["rate"] = FACTOR * row["largest_rate"]
        row["windows"] = {k: FACTOR * v for k, v in sorted(row["largest_window_relative_difference"].items())}
        row["factor"] = FACTOR
    return sorted(out.values(), key=lambda r: (r["pair"], r["model"], r["fold"]))
