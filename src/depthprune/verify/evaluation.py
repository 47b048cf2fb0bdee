"""Evaluation re-measurement: a cell's removed set evaluated again here on a seeded sample of its task
items and perplexity windows, compared one by one with the recorded outcomes.

Rule E2: rule E1 (written down on 2026-12-03 before its first run: the issue's "Evaluation" check), with
window bands relative to the recorded window NLL, as rule 3 of :mod:`depthprune.verify.bands` has it
(written down before it was built or run, after E1's absolute window bands failed by a window 7% past
a maximum over three sets):

* **Sample.** An *item* is one document of one task; its outcomes are every metric recorded for it
  (``acc``, and ``acc_norm`` where the task has it). Of a cell's ``N`` recorded items (all tasks pooled)
  the sample holds :func:`sample_size` ``(N)`` items: the smallest ``n`` for which ``n`` items drawn without
  replacement hold at least one of ``ceil(CHANGE * N)`` changed items with probability ``>= CATCH``
  (hypergeometric). Per perplexity dataset, the same rule over its windows. The generator is seeded by
  the seed, the model and the removed set (:func:`sample`), so the cells that removed one set share one
  evaluation, done once.
* **Items.** A sampled item *disagrees* when any of its recorded outcomes differs from here's. A cell
  fails when its disagreements exceed ``floor(rate * n)``, ``rate`` being its item band; the output also
  gives the smallest share of changed items this sample and allowance catch with probability ``CATCH``
  (:func:`detectable_change`): 1% where the band allows no disagreement, more where rounding alone
  flips items.
* **Windows.** Each sampled window's mean NLL (nats per token) lies within its band of the recorded one
  (the dataset's relative window band times the recorded NLL), or the cell fails.
* **Bands, cross-fitted.** Every removed set falls in one of two folds
  (:func:`depthprune.verify.bands.fold`: a hash of the model and the set; no seed, no selection). ``--measure-bands`` evaluates every removed set of the
  model's selected cells and measures, per pair of numeric classes, model and fold, the item band
  ``FACTOR`` times the largest disagreement rate among the fold's sets, and per dataset the relative
  window band ``FACTOR`` times the largest ``|recorded - here| / recorded`` among the fold's windows. A cell is checked against
  the *other* fold's bands: measured on evaluations it is no part of. Where the other fold has none, the
  widest measured for the same precision pair stands in, flagged; where there is none, the evaluation is
  NOT VERIFIED.

Rule E3 (rule 4 of :mod:`depthprune.verify.bands`, written down on 2026-12-05 before it was built or run, after
E2's twice-a-maximum over 4-5 sets per fold failed 7 of the real archive's 58 evaluations by one window or a few
items): the same sample, folds and checks; bands sized for the checks they face.

* **Items.** The fold's disagreements ``k`` of ``n`` compared items give a one-sided 95% upper bound on the
  disagreement rate, ``rate_upper`` (Clopper-Pearson). A cell with ``n`` sampled items may have up to the
  ``1 - ALPHA / C`` quantile of Binomial(``n``, ``rate_upper``) disagreements, ``C`` the evaluations the full
  sample checks for the pair and model over the archive.
* **Windows.** Per dataset, rule 4's band over the fold's relative window differences (all of them, not the
  widest), ``K`` the windows the full sample checks for the pair and model over the archive.
* Each check reports its z-scores: the disagreements' ``(k - n p) / sqrt(n p (1 - p))`` and the largest
  window difference over its ``s_up``.

Rows of rule E2 still serve, said so in their name.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from depthprune.results.schema import Result
from depthprune.verify.bands import ALPHA, EVAL_RULE, fold, pair_key, precision_pair

#: a change to this share of a cell's items is caught with probability CATCH (the issue's 1% and 95%)
CHANGE = 0.01
CATCH = 0.95
#: the rule the evaluation bands are measured by (module docstring; kept with the table in bands)
RULE = EVAL_RULE
VERIFIED = "verified"
FAILED = "failed"
NOT_VERIFIED = "not verified"


def sample_size(population: int, change: float = CHANGE, catch: float = CATCH) -> int:
    """The smallest ``n`` such that ``n`` of ``population`` drawn without replacement hold at least one of
    ``ceil(change * population)`` changed ones with probability ``>= catch``."""
    from scipy.stats import hypergeom

    if population <= 0:
        return 0
    changed = max(1, math.ceil(change * population))
    lo, hi = 1, population
    while lo < hi:  # P(no changed one drawn) falls as n grows
        mid = (lo + hi) // 2
        if hypergeom.pmf(0, population, changed, mid) <= 1 - catch:
            hi = mid
        else:
            lo = mid + 1
    return lo


def detectable_change(population: int, n: int, allowed: int, catch: float = CATCH) -> float:
    """The smallest share of ``population`` items whose change a sample of ``n`` catches (more than
    ``allowed`` of them drawn) with probability ``>= catch``; 1.0 where none does."""
    from scipy.stats import hypergeom

    for changed in range(1, population + 1):
        if hypergeom.sf(allowed, population, changed, n) >= catch:
            return changed / population
    return 1.0


def item_counts(result: Result) -> dict[str, int]:
    """Task -> number of recorded items (every metric of a task records the same items)."""
    return {task: len(next(iter(metrics.values()))) for task, metrics in sorted(result["item_outcomes"].items())
            if metrics}


def sample(result: Result, seed: int = 0, item_change: float | None = CHANGE,
           window_change: float = CHANGE) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """The seeded item sample (task -> sorted item indices) and window sample (dataset -> sorted window
    indices) of a cell's removed set (rule E1; a change to ``item_change`` of the items, ``window_change`` of a
    dataset's windows, caught with probability ``CATCH``; ``item_change`` None: no item)."""
    key = f"{seed}:{result.identity.model}:{sorted(result['removed'])}"
    counts = item_counts(result)
    pooled = [(task, i) for task, n in counts.items() for i in range(n)]
    n = 0 if item_change is None else sample_size(len(pooled), item_change)
    drawn = random.Random(f"items:{key}").sample(pooled, n)
    items = {task: sorted(i for t, i in drawn if t == task) for task in counts}
    windows = {}
    for name, nll in sorted((result.get("window_nll") or {}).items()):
        windows[name] = sorted(random.Random(f"windows:{key}:{name}").sample(range(len(nll)),
                                                                             sample_size(len(nll), window_change)))
    return {t: i for t, i in items.items() if i}, windows


@dataclass
class Measured:
    """One removed set's sampled items and windows, evaluated here."""

    items: dict[str, dict[str, dict[int, int]]]  # task -> metric -> item index -> 0/1
    windows: dict[str, dict[int, float]]  # dataset -> window index -> mean NLL (nats per token)
    seconds: float = 0.0


def measure_here(session: Any, result: Result, items: Mapping[str, list[int]],
                 windows: Mapping[str, list[int]]) -> Measured:
    """Evaluate ``result``'s removed set on ``session``'s model: the sampled items through lm-eval
    (``samples=``, the recorded protocol otherwise) and the sampled windows."""
    from depthprune.evaluation.evaluate import (
        _ppl_windows,
        lm_eval_model,
        lm_eval_tasks,
        run_lm_eval,
        windows_perplexity,
    )
    from depthprune.model.masking import skip_layers

    cfg = session.profile.eval_config(**result["evaluation_protocol"]["config"])  # as recorded, checked
    removed = list(result["removed"])
    dense_blocks = min(removed) if removed else session.n_layers
    start = time.perf_counter()
    measured = Measured({}, {})
    with skip_layers(session.model, removed):
        for name, idx in windows.items():
            all_windows, _ = _ppl_windows(name, session.profile, session.tokenizer, cfg.seq_len, cfg.c4_windows)
            nll: list[float] = []
            windows_perplexity(session.model, all_windows[idx], cfg.batch_size, dense_blocks=dense_blocks,
                               window_nll=nll)
            measured.windows[name] = dict(zip(idx, nll))
        lm_names = {task: lm_name for lm_name, task in lm_eval_tasks(session.profile, cfg).items()}
        missing = sorted(set(items) - set(lm_names))
        if missing:
            raise ValueError(f"{result['cell']}: recorded items of tasks {missing} that this profile's evaluation "
                             f"does not run ({', '.join(lm_names)})")
        if items:
            lm = lm_eval_model(session.model, session.tokenizer, cfg, dense_blocks)
            out = run_lm_eval(lm, session.profile, cfg, samples={lm_names[t]: list(i) for t, i in items.items()})
            for task in items:
                logged = (out.get("samples") or {}).get(lm_names[task], [])
                got: dict[str, dict[int, int]] = {}
                for s in logged:
                    for metric in result["item_outcomes"][task]:
                        if s.get(metric) in (0, 1):
                            got.setdefault(metric, {})[int(s["doc_id"])] = int(s[metric])
                measured.items[task] = got
    measured.seconds = time.perf_counter() - start
    return measured


# -- bands --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalBand:
    """The evaluation band a cell is checked against: the allowed rate of item disagreements and each
    dataset's relative window band (a window's band is it times the window's recorded NLL), measured on
    ``fold``'s removed sets."""

    pair: str
    model: str
    fold: int
    rate: float  # E2: the allowed share of disagreements; E3: the upper bound on rounding's disagreement rate
    windows: dict[str, float]
    measured_for: str
    flagged: str | None = None
    rule: str = EVAL_RULE
    evaluations: int = 1  # E3: the evaluations the archive checks against this band (C)
    window_sigma: dict[str, float] = field(default_factory=dict)  # E3: relative s_up per dataset

    def allowed(self, items: int) -> int:
        """The disagreements ``items`` sampled items may have (module docstring)."""
        if self.rule == "E2":
            return math.floor(self.rate * items + 1e-9)
        from scipy.stats import binom

        return int(binom.ppf(1 - ALPHA / max(1, self.evaluations), items, self.rate)) if items else 0

    def items_z(self, disagreements: int, items: int) -> float | None:
        """Disagreements in standard deviations above rounding's upper rate (E3), None under E2."""
        if self.rule == "E2" or not items or not 0 < self.rate < 1:
            return None
        return (disagreements - items * self.rate) / math.sqrt(items * self.rate * (1 - self.rate))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """Recorded outcomes against ``measured``'s: items compared, those that disagree (any recorded metric),
    the first few disagreeing outcomes, and each dataset's largest window ``|recorded - here|``, in nats
    and relative to the recorded NLL."""

    items: int
    disagreements: int
    examples: list[str]
    widest: dict[str, float]
    widest_relative: dict[str, float] = field(default_factory=dict)
    relative: dict[str, list[float]] = field(default_factory=dict)  # every window's |recorded - here| / recorded

    @property
    def rate(self) -> float:
        return self.disagreements / self.items if self.items else 0.0


def compare(result: Result, measured: Measured) -> Comparison:
    """One pass over ``measured``'s items and windows against ``result``'s recorded ones."""
    out = Comparison(0, 0, [], {})
    for task, metrics in sorted(measured.items.items()):
        for doc in sorted(set().union(*(set(m) for m in metrics.values()))):
            out.items += 1
            flipped = [(m, got[doc]) for m, got in sorted(metrics.items())
                       if doc in got and int(result["item_outcomes"][task][m][doc]) != got[doc]]
            out.disagreements += bool(flipped)
            out.examples += [f"{task} item {doc} {m}: recorded {1 - here}, here {here}" for m, here in flipped]
    del out.examples[5:]
    out.widest = {name: max((abs(result["window_nll"][name][i] - v) for i, v in got.items()), default=0.0)
                  for name, got in measured.windows.items()}
    out.relative = {name: [abs(result["window_nll"][name][i] - v) / abs(result["window_nll"][name][i])
                           for i, v in sorted(got.items()) if result["window_nll"][name][i]]
                    for name, got in measured.windows.items()}
    out.widest_relative = {name: max(diffs, default=0.0) for name, diffs in out.relative.items()}
    return out


def evaluation_band(table: Mapping[str, Any], recorded: str, here: str, model: str, removed: Sequence[int]) -> EvalBand | None:
    """The band a cell that removed ``removed`` is checked against: the other fold's (module docstring)."""
    key, other = pair_key(recorded, here), 1 - fold(model, removed)
    rows = table.get("evaluation", [])

    def band(row: Mapping[str, Any], flagged: str | None = None) -> EvalBand:
        rule = str(row.get("rule", "E2"))
        return EvalBand(key, model, row["fold"], row["rate"], dict(row["windows"]),
                        f"{row['pair']} | {row['model']} | fold {row['fold']}" + (" | rule E2" if rule == "E2" else ""),
                        flagged, rule, int(row.get("evaluations", 1)),
                        {k: v["rms_upper"] for k, v in (row.get("window_spread") or {}).items()})

    for row in rows:
        if row["pair"] == key and row["model"] == model and row["fold"] == other:
            return band(row)
    same = [r for r in rows if precision_pair(r["pair"]) == precision_pair(key)]
    if not same:
        return None
    widest = max(same, key=lambda r: (r["rate"], max(r["windows"].values(), default=0.0)))
    return band(widest, f"no evaluation band measured for {key}, {model}, fold {other}: the widest measured for "
                        f"{precision_pair(key)} stands in")


# -- the check ----------------------------------------------------------------------------------


@dataclass
class EvalCheck:
    """What re-evaluating one cell's removed set showed."""

    status: str = VERIFIED
    band: EvalBand | None = None
    items: int = 0  # sampled items compared
    population: int = 0
    disagreements: int = 0
    allowed: int = 0
    detectable: float = 1.0  # the smallest share of changed items caught with probability CATCH
    windows: int = 0
    largest_window_difference: float = 0.0
    items_z: float | None = None  # E3: disagreements in standard deviations above rounding's upper rate
    largest_window_z: float | None = None  # E3: the largest window difference over its s_up
    disagreement: str | None = None
    examples: list[str] = field(default_factory=list)  # the first few disagreeing items

    @property
    def agreement(self) -> float:
        return 1 - self.disagreements / self.items if self.items else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.upper(), "band": self.band.to_dict() if self.band else None,
                "items": self.items, "population": self.population, "disagreements": self.disagreements,
                "allowed": self.allowed, "agreement": self.agreement, "detectable_change": self.detectable,
                "windows": self.windows, "largest_window_difference": self.largest_window_difference,
                "items_z": self.items_z, "largest_window_z": self.largest_window_z, "disagreement": self.disagreement, "examples": self.examples}


def check_evaluation(result: Result, measured: Measured, band: EvalBand | None) -> EvalCheck:
    """Rule E2's checks of ``result``'s recorded outcomes against ``measured`` (this machine's)."""
    check = EvalCheck(band=band, population=sum(item_counts(result).values()))
    if band is None:
        check.status = NOT_VERIFIED
        check.disagreement = "no evaluation band measured for this precision pair: cannot tell rounding from a change"
        return check
    seen = compare(result, measured)
    check.items, check.disagreements, check.examples = seen.items, seen.disagreements, seen.examples
    check.allowed = band.allowed(check.items)
    check.detectable = detectable_change(check.population, check.items, check.allowed)
    check.items_z = band.items_z(check.disagreements, check.items)
    if check.disagreements > check.allowed:
        check.status = FAILED
        z = "" if check.items_z is None else f", z {check.items_z:.1f}"
        check.disagreement = (f"{check.disagreements} of {check.items} sampled items disagree with the recorded "
                              f"outcomes, more than the {check.allowed} the item band allows (rate {band.rate:.3g}"
                              f"{z}, {band.measured_for}); first: {check.examples[0]}")
    for name, got in sorted(measured.windows.items()):
        check.windows += len(got)
        check.largest_window_difference = max(check.largest_window_difference, seen.widest.get(name, 0.0))
        relative = band.windows.get(name)
        sigma = band.window_sigma.get(name)
        for i, here in sorted(got.items()):
            diff = abs(result["window_nll"][name][i] - here)
            if sigma and result["window_nll"][name][i]:
                z = diff / (sigma * abs(result["window_nll"][name][i]))
                check.largest_window_z = max(check.largest_window_z or 0.0, z)
            if check.disagreement is not None:
                continue
            nats = None if relative is None else relative * abs(result["window_nll"][name][i])
            if nats is None:
                check.status = NOT_VERIFIED
                check.disagreement = f"no window band measured for {name} ({band.measured_for})"
            elif diff > nats:
                check.status = FAILED
                check.disagreement = (f"{name} window {i}: recorded mean NLL {result['window_nll'][name][i]:.6g}, "
                                      f"here {here:.6g}, |difference| {diff:.3g} > window band {nats:.3g}, {diff / nats:.2f}x it"
                                      + ("" if not sigma else f", z {diff / (sigma * abs(result['window_nll'][name][i])):.1f}")
                                      + f" ({relative:.3g} of the recorded NLL, {band.measured_for})")
    return check
