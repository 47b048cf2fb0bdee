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

Rule 4, written down on 2026-12-05 before it was built or run (rule 3's twice-a-maximum, over ~50 measuring
sets, failed 9 of the real archive's 84 cells by values 1.05-1.6x past their bands: docs/verify.md), sizes
a band for the number of checks it faces. Same measuring sets; per pair, objective and model:

* ``s``, the root-mean-square of the measuring sets' differences (relative for ppl, nats for margin), and
  its one-sided 95% upper bound ``s_up = s * sqrt(m / chi2.ppf(ALPHA, m))`` (``m`` differences);
* the band is ``s_up * z``, ``z = norm.ppf(1 - ALPHA / (2 K))``, ``K`` the number of sets the full sample
  checks for that pair, objective and model over every cell of the selected grids in the archive (fixed by
  the archive, not by the cells selected): where differences are normal, rounding alone fails any of them
  with probability <= ``ALPHA``;
* each check reports its z-score, ``|difference| / s_up`` (:attr:`Band.sigma`), so that a tail heavier than
  normal shows as such.

Rule 5, written down on 2026-12-06 before it was built or run (issue 59: on an AMD EPYC the real CI slice's
gemma3 margin oneshot M4 cell failed the grid's check across precisions on set [1], a single that breaks the
model and moves its margin loss 16 nats from the dense one, by 0.333 nats against rule 4's absolute 0.258,
a band measured on sets that do not; ``depthprune verify`` of the same cell said VERIFIED, having checked
its removed set only). Same measuring sets, the same ``ALPHA``, ``s_up`` and ``z`` as rule 4; what changes
is the scale a difference is read on, and which sets a band may be measured on:

* a set's *weight* is ``w = 1 + |L - L0| / |L0|``, ``L`` its recorded loss and ``L0`` the recorded dense
  loss of its condition: how far the set moves the model, in units of the dense loss. For ppl, whose loss
  is positive, this is rule 4's ``L / L0`` for every set worse than the dense model (rounding grows with
  the NLL), and it no longer shrinks the band of a set better than dense; for margin it replaces rule 4's
  one absolute band, which a set that breaks the model outgrows. A condition whose dense loss is 0 has no
  scale, and no band;
* the band of a set is ``s_up * z * w`` nats, with ``s_up`` rule 4's upper bound on the RMS of the
  *weighted* differences ``|recorded - here| / w`` of the measuring sets;
* cross-fitted: every set belongs to a fold (:func:`fold`, a hash of the model and the set, as the
  evaluation bands' folds), and the band of a set of fold ``f`` is measured on the measuring sets of the
  other fold only, so no set is checked against a band its own difference shaped, whichever sets a check
  compares (the grid's check across precisions and ``depthprune verify`` compare every set the two runs
  share, the dense model and the singles included). ``K``, the checks a band faces, counts the sets of its
  fold that verification checks over the archive;
* each band row keeps the measuring sets it was measured on (set, recorded, here, dense), so that a later
  rule is computed from the same measurements instead of guessed;
* a check that asks for a set's band (it gives the set and its condition's dense loss) gets the rule 5 band
  where one is measured for its pair, objective, model and fold, else rule 4's, said so in its name. The
  report's firmness (:mod:`depthprune.verify.firmness`) asks for a decision's band without a set, and keeps
  rule 4's: its rivals (``archive/rivals-tiny.json``) were followed with the model under those bands.

Rows keep the rule they were measured by (``rule``); a rule 3 row still serves, said so in its name.

The table (``bands.json`` beside this file) is written by ``depthprune verify --measure-bands``; each
band names its measurement, and the table keeps each measurement's command, commit, machine and cells
once (``measurements``). It also holds the evaluation bands (:mod:`depthprune.verify.evaluation`). Where a pair, objective
and model has no measured band, :func:`loss_band` takes the widest band measured for the same precision
pair (bf16 against fp32, say) and flags it; where the precision pair has none, there is no band and
the cell is NOT VERIFIED, never passed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.model.precision import SHORT_NAMES, bf16_class, dtype_name

BANDS_FILE = Path(__file__).with_name("bands.json")
#: rule 3: a band was this many times the largest difference measured on its measuring sets
FACTOR = 2.0
#: rule 4: the chance that rounding alone fails one band's checks over the whole archive (fixed beforehand)
ALPHA = 0.05
#: measuring sets per condition and set size >= 2 (module docstring)
HELD_OUT = 8
#: the rule new bands are measured by (module docstring); a table may still hold rows of rule 3
RULE = 5
#: the rules a row may have been measured by and still serve
RULES = (3, 4, 5)
#: the rule of new evaluation bands (:mod:`depthprune.verify.evaluation`), and those that still serve
EVAL_RULE = "E3"
EVAL_RULES = ("E2", "E3")
#: how a rule 3 or 4 band scales, per objective (module docstring): with the recorded loss, or not
KIND = {"ppl": "relative", "margin": "absolute"}
#: how a rule 5 band scales (module docstring): with the set's distance from the dense loss
DISTANCE = "distance"


def fold(model: str, removed: Iterable[int]) -> int:
    """A set's fold (0 or 1): fixed by the model and the set, so a band measured on one fold is never measured
    on the sets (rule 5) or removed sets' evaluations (:mod:`depthprune.verify.evaluation`) it checks, whatever
    the seed or selection."""
    return hashlib.sha256(f"{model}:{sorted(removed)}".encode()).digest()[0] % 2


def weight(loss: float, dense: float) -> float | None:
    """Rule 5's weight of a set whose recorded loss is ``loss`` in a condition whose recorded dense loss is
    ``dense``: ``1 + |loss - dense| / |dense|`` (module docstring); None where there is no scale (a dense loss
    of 0, or a loss that is not finite)."""
    if not (math.isfinite(loss) and math.isfinite(dense)) or dense == 0:
        return None
    return 1.0 + abs(loss - dense) / abs(dense)


def numeric_class(environment: Mapping[str, Any]) -> str:
    """``<precision>/<kernel class>`` of a result's or this machine's environment record."""
    dtype = dtype_name(environment.get("dtype", ""))
    precision = SHORT_NAMES.get(dtype, dtype or "unknown")
    if str(environment.get("device", "cpu")).startswith("cuda"):
        return f"{precision}/cuda"
    kernels = environment.get("kernels") or {}
    if precision == "bf16":
        return f"bf16/{bf16_class(kernels.get('bf16_matmul_kernel'))}"
    capability = str(kernels.get("capability") or "unknown").lower()
    # MKL runs the float32 products and dispatches by itself (depthprune.model.precision): where it ran another ISA
    # than ATen's kernels (a run capped without MKL_ENABLE_INSTRUCTIONS), the class says so; older records lack it
    mkl = str(kernels.get("fp32_matmul_isa") or "unknown")
    if precision == "fp32" and not mkl.startswith("unknown") and mkl != capability:
        return f"fp32/cpu-{capability}+mkl-{mkl}"
    return f"{precision}/cpu-{capability}"


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
    sigma: float | None = None  # rules 4 and 5: the upper bound on rounding's RMS difference at this loss (nats)
    rule: int = RULE
    weight: float | None = None  # rule 5: the set's weight (its distance from the dense loss: module docstring)

    def z(self, difference: float) -> float | None:
        """A difference in units of :attr:`sigma` (rules 4 and 5), None for a rule 3 band."""
        return abs(difference) / self.sigma if self.sigma else None

    def to_dict(self) -> dict[str, Any]:
        return {"pair": self.pair, "objective": self.objective, "model": self.model, "loss": self.loss,
                "nats": self.nats, "measured_for": self.measured_for, "flagged": self.flagged,
                "sigma": self.sigma, "rule": self.rule, "weight": self.weight}


def load_table(path: str | Path = BANDS_FILE) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        return {"rule": RULE, "bands": []}
    table = read_json(path)
    if table.get("rule") not in RULES:  # a table of another rule is not this rule's measurement
        return {"rule": RULE, "bands": []}
    # each row says its rule (a rule 3 table's rows did not: the table's); rows of a retired rule do not serve
    bands = [{"rule": table["rule"], **r} for r in table.get("bands", [])]
    evaluation = [{"rule": table.get("evaluation_rule"), **r} for r in table.get("evaluation", [])]
    return {**table, "bands": [r for r in bands if r["rule"] in RULES],
            "evaluation": [r for r in evaluation if r["rule"] in EVAL_RULES]}


def _name(row: Mapping[str, Any]) -> str:
    if row.get("rule") == 5:
        return f"{row['pair']} | {row['objective']} | {row['model']} | rule 5, measured on fold {row['fold']}"
    return f"{row['pair']} | {row['objective']} | {row['model']}" + (" | rule 3" if row.get("rule") == 3 else "")


def _nats(row: Mapping[str, Any], loss: float, key: str = "band") -> float:
    """The band (or ``key``'s value) of a set whose recorded loss is ``loss``, from its row (module docstring)."""
    return row[key] * abs(loss) if row["kind"] == "relative" else row[key]


def _band_of_row(key: str, objective: str, model: str, loss: float, row: Mapping[str, Any],
          flagged: str | None = None) -> Band:
    sigma = _nats(row, loss, "rms_upper") if row.get("rms_upper") is not None else None
    return Band(key, objective, model, loss, _nats(row, loss), _name(row), flagged, sigma, int(row.get("rule", RULE)))


def loss_band(table: Mapping[str, Any], recorded: str, here: str, objective: str, model: str,
           loss: float, removed: Iterable[int] | None = None, dense: float | None = None) -> Band | None:
    """The band of a set whose recorded loss is ``loss``, a recorded class against this machine's
    (module docstring), or None where none is measured for the precision pair and objective.

    A check that gives the set (``removed``) and its condition's recorded ``dense`` loss gets rule 5's band
    where one is measured for the pair, objective, model and the other fold than the set's (None where the
    condition has no scale: :func:`weight`); otherwise, and for a caller that gives neither (the report's
    firmness), rule 4's or 3's."""
    key = pair_key(recorded, here)
    if removed is not None and dense is not None:
        other = 1 - fold(model, removed)
        for row in table.get("bands", []):
            if (row.get("rule") == 5 and row["pair"] == key and row["objective"] == objective
                    and row["model"] == model and row["fold"] == other):
                w = weight(loss, dense)
                if w is None:
                    return None
                return Band(key, objective, model, loss, row["band"] * w, _name(row), None, row["rms_upper"] * w, 5, w)
    rows = [r for r in table.get("bands", []) if r["objective"] == objective and r.get("rule") != 5]
    for row in rows:
        if row["pair"] == key and row["model"] == model:
            return _band_of_row(key, objective, model, loss, row)
    same = [r for r in rows if precision_pair(r["pair"]) == precision_pair(key)]
    if not same:
        return None
    widest = max(same, key=lambda r: r["band"])
    return _band_of_row(key, objective, model, loss, widest,
                 flagged=f"no band measured for {key}, {objective}, {model}: the widest measured for "
                         f"{precision_pair(key)} ({_name(widest)}) stands in")


#: one measuring set's difference: pair, objective, model, the set, its recorded loss, its loss here, and the
#: recorded dense loss of its condition
Difference = tuple[str, str, str, tuple[int, ...], float, float, float]
#: one removed set's evaluation measured: pair, model, fold, items disagreeing, items compared,
#: dataset -> every sampled window's ``|recorded - here| / recorded``
EvalRow = tuple[str, str, int, int, int, dict[str, list[float]]]


def rms_upper(rms: float, m: int, alpha: float = ALPHA) -> float:
    """The one-sided ``1 - alpha`` upper bound on a root-mean-square measured over ``m`` differences."""
    from scipy.stats import chi2

    return rms * math.sqrt(m / chi2.ppf(alpha, m)) if m else math.inf


def z_for(checks: int, alpha: float = ALPHA) -> float:
    """How many ``s_up`` a two-sided band spans so that ``checks`` normal differences all lie inside it with
    probability >= ``1 - alpha`` (Bonferroni)."""
    from scipy.stats import norm

    return float(norm.ppf(1 - alpha / (2 * max(1, checks))))


def _spread(diffs: Sequence[float], checks: int) -> dict[str, Any]:
    """Rule 4's statistics of ``diffs`` for a band facing ``checks`` checks (module docstring)."""
    m = len(diffs)
    rms = math.sqrt(sum(d * d for d in diffs) / m) if m else math.inf
    up, z = rms_upper(rms, m), z_for(checks)
    return {"rms": rms, "m": m, "rms_upper": up, "checks": checks, "z": z, "alpha": ALPHA, "band": up * z}


def measure(differences: Iterable[Difference], provenance: Mapping[str, Any],
            table: Mapping[str, Any] | None = None, evaluation: Iterable[EvalRow] = (),
            checks: Mapping[tuple[str, str, str, int], int] | None = None,
            eval_checks: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """A new table: ``table`` with rule 5's two bands per (pair, objective, model) of ``differences`` replaced,
    one per fold of measuring sets (module docstring: ``checks[pair, objective, model, fold]`` sets of that fold
    checked over the archive), and the evaluation bands of ``evaluation`` (:func:`measure_rows`,
    ``eval_checks``) replaced per (pair, model, fold). Rows of rules 3 and 4 stay as they are. Each row names
    its measurement; ``provenance`` is kept once under that name."""
    old = table or {}
    checks = checks or {}
    measurements = dict(old.get("measurements", {}))
    same = [k for k, v in measurements.items() if v == dict(provenance)]  # one run measures model by model
    name = same[0] if same else f"m{1 + max((int(k[1:]) for k in measurements if k[1:].isdigit()), default=0)}"
    measurements[name] = dict(provenance)
    seen: dict[tuple[str, str, str], list[tuple[list[int], float, float, float]]] = {}
    for pair, objective, model, removed, recorded, here, dense in differences:
        if math.isfinite(recorded) and math.isfinite(here) and weight(recorded, dense) is not None:
            seen.setdefault((pair, objective, model), []).append((sorted(removed), recorded, here, dense))
    rows = [r for r in old.get("bands", []) if r.get("rule") != 5 or (r["pair"], r["objective"], r["model"]) not in seen]
    for (pair, objective, model), entries in seen.items():
        for f in (0, 1):
            mine = sorted((e for e in entries if fold(model, e[0]) == f), key=lambda e: (len(e[0]), e[0]))
            weighted = [abs(rec - here) / (weight(rec, dense) or 1.0) for _, rec, here, dense in mine]
            sizes: dict[str, int] = {}
            for e in mine:
                sizes[str(len(e[0]))] = sizes.get(str(len(e[0])), 0) + 1
            rows.append({"pair": pair, "objective": objective, "model": model, "fold": f, "kind": DISTANCE,
                         "rule": 5, **_spread(weighted, checks.get((pair, objective, model, 1 - f), 1)),
                         "largest_weighted": max(weighted, default=0.0), "sets": len(mine),
                         "sets_per_size": dict(sorted(sizes.items(), key=lambda kv: int(kv[0]))),
                         "measuring_sets": [list(e) for e in mine], "measured_by": name})
    rows.sort(key=lambda r: (r["pair"], r["objective"], r["model"], r.get("rule", RULE), r.get("fold", -1)))
    new_eval = [{**row, "measured_by": name} for row in measure_rows(list(evaluation), eval_checks or {})]
    keys = {(r["pair"], r["model"], r["fold"]) for r in new_eval}
    eval_rows = [r for r in old.get("evaluation", []) if (r["pair"], r["model"], r["fold"]) not in keys] + new_eval
    eval_rows.sort(key=lambda r: (r["pair"], r["model"], r["fold"]))
    used = {r["measured_by"] for r in rows + eval_rows if isinstance(r.get("measured_by"), str)}
    return {"about": "depthprune.verify.bands: rounding bands of calibration losses per pair of numeric classes, "
                     "objective and model (rule 5: per fold of measuring sets, scaled by a set's distance from the "
                     "dense loss; rules 3 and 4: ppl relative to the recorded loss, margin in nats), measured on "
                     "sets verification never checks against them; and evaluation bands (depthprune.verify.evaluation: "
                     "item disagreements, window NLL relative to the recorded one) per pair, model and fold; each row "
                     "says its rule; written by depthprune verify --measure-bands, never by hand",
            "rule": RULE, "evaluation_rule": EVAL_RULE, "bands": rows, "evaluation": eval_rows,
            "measurements": {k: v for k, v in sorted(measurements.items()) if k in used}}


def measure_rows(rows: Sequence[EvalRow], checks: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Evaluation band rows of rule E3 (:mod:`depthprune.verify.evaluation`), one per (pair, model, fold):
    the fold's item disagreements' one-sided upper bound ``rate_upper`` (Clopper-Pearson, ``1 - ALPHA``) with
    the number of evaluations the archive checks (``checks[pair, model]["evaluations"]``), and per dataset rule
    4's spread of the fold's relative window differences (``checks[pair, model]["windows"][dataset]``)."""
    from scipy.stats import beta

    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for pair, model, f, flips, items, windows in rows:
        row = out.setdefault((pair, model, f), {"pair": pair, "model": model, "fold": f, "rule": EVAL_RULE,
                                                "flips": 0, "items": 0, "largest_rate": 0.0, "sets": 0,
                                                "diffs": {}})
        row["flips"] += flips
        row["items"] += items
        row["largest_rate"] = max(row["largest_rate"], flips / items if items else 0.0)
        row["sets"] += 1
        for name, diffs in windows.items():
            row["diffs"].setdefault(name, []).extend(diffs)
    for (pair, model, _), row in out.items():
        k, n = row["flips"], row["items"]
        row["rate_upper"] = 1.0 if k >= n else float(beta.ppf(1 - ALPHA, k + 1, n - k))
        row["rate"] = row["rate_upper"]
        row["evaluations"] = int((checks.get((pair, model)) or {}).get("evaluations", 1))
        per_window = (checks.get((pair, model)) or {}).get("windows", {})
        diffs = dict(sorted(row.pop("diffs").items()))
        row["window_spread"] = {name: {**_spread(d, int(per_window.get(name, 1))), "largest": max(d, default=0.0)}
                                for name, d in diffs.items()}
        row["windows"] = {name: v["band"] for name, v in row["window_spread"].items()}
        row["alpha"] = ALPHA
    return sorted(out.values(), key=lambda r: (r["pair"], r["model"], r["fold"]))
