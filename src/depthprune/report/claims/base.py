"""What a claim is, the registry of claims, their thresholds, and judging them per grid.

A :class:`depthprune.report.claims.base.Claim` carries everything the report says about one
claim: its quote, the statistic it computes, the rules that decide it (``rules``: which
threshold each measure is compared with, and how), a gist for the verdict matrix, and its
section of ``report/claims.toml`` (named by its id, holding its ``parameters``). Its judge, a
pure function of one grid's solutions and the thresholds, is registered with it by
:meth:`depthprune.report.claims.base.ClaimRegistry.register`, so a claim lives in one place:
the module of its family. Registering an id twice is an error naming both judges.

The thresholds live in ``report/claims.toml``, not in ``cases/``: every ``*.toml`` in
``cases/`` is read as a grid (:func:`depthprune.grid.cases.load_grids`, used by the bench and
``depthprune cell``), so a thresholds file there would break them; and ``report/`` is outside
the result fingerprint (``depthprune.results.provenance``), so fixing a threshold never invalidates a
finished cell. The order of its sections is the order of the claims in every table.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from depthprune.common.plugins import discover
from depthprune.report.claims import helpers
from depthprune.results.schema import Result

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

THRESHOLDS_FILE = Path(__file__).resolve().parent.parent / "claims.toml"
PAPER_TEXT = "001_132f0670777f7341.txt"  # shared/paper/: the paper's own text (v2)

HELD = "HELD"
NOT_HELD = "NOT HELD"
NOT_MEASURED = "NOT MEASURED"

#: a claim's judge: (grid, the grid's solutions, the claim's thresholds, the general ones) -> Verdict
Judge = Callable[[str, list[Result], Mapping[str, Any], Mapping[str, Any]], "Verdict"]
#: which of a grid's results a judge sees: (the grid's results, the claim's thresholds, the general ones)
Selector = Callable[[Sequence[Result], Mapping[str, Any], Mapping[str, Any]], list[Result]]


class Rule(NamedTuple):
    """How one measure decides its claim, for the reader: the threshold parameter and the test
    HELD needs ("CI" = the measure's interval). The judge is the definition; this is its caption."""

    measure: str
    param: str
    test: str  # a template: "≥ {}" is formatted with the parameter's value


def _paper_select(rows: Sequence[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> list[Result]:
    return helpers.select(rows, g)


@dataclass(frozen=True)
class Claim:
    """One claim of the v2 text: where it is, its words, how it is measured and decided."""

    id: str  # also its section's name in claims.toml
    section: str  # the section of the paper the claim is about
    source: str  # where in the v2 text the quoted sentence stands
    quote: str  # verbatim from 001_…txt (whitespace aside)
    statistic: str  # what is computed, and what is compared with the threshold
    threshold: str  # the main named threshold parameter (the one swept by default)
    parameters: tuple[str, ...] = ()  # every parameter of its claims.toml section
    rules: tuple[Rule, ...] = ()  # how each decisive measure is compared with its threshold
    gist: str = ""  # the claim in a few plain words, for the verdict matrix (its section where empty)
    #: does its judge read a cell's evaluation (metrics, items, windows, calibration loss)? False: only the
    #: removed sets and costs, so a cell can take another set without that set's evaluation (report.firmness)
    reads_evaluation: bool = True
    #: does its judge read only what a stored reference keeps (removed sets, calibration losses, metrics)? True:
    #: REPORT's precision section re-judges it with the float32 references in place of the bf16 cells
    reads_only_references: bool = False
    #: is it judged on healed results (:mod:`depthprune.healing`; a claim beyond the paper: do its findings survive
    #: a heal?) rather than on results of the pruned models as searched? Each claim sees only its own kind
    reads_healed: bool = False
    judge: Judge | None = field(default=None, compare=False, repr=False)
    select: Selector = field(default=_paper_select, compare=False, repr=False)  # the solutions it counts

    def rule(self, measure: str) -> Rule | None:
        """The rule that decides ``measure``; None for a measure that is only reported."""
        return next((r for r in self.rules if r.measure == measure), None)

    def verdicts(self, results: Iterable[Result],
                 thresholds: Mapping[str, Any] | None = None) -> list[Verdict]:
        """One verdict per grid, each judged on that grid's own solutions: the one place grids are
        split, never pooled (grids differ in models, sizes and data)."""
        if self.judge is None:
            raise ValueError(f"claim {self.id!r} has no judge")
        t = thresholds if thresholds is not None else load_thresholds()
        g = t["general"]
        mine = [r for r in results if (r.identity.heal is not None) == self.reads_healed]
        return [self.judge(grid, self.select(rows, t[self.id], g), t[self.id], g)
                for grid, rows in helpers.by_grid(mine).items()]


@dataclass(frozen=True)
class Measure:
    """One number a verdict states, with its interval and minimum detectable effect where it has them."""

    name: str
    value: float | None
    low: float | None = None  # the interval's bounds (confidence as the claim's thresholds say)
    high: float | None = None
    mde: float | None = None  # the smallest departure from the threshold detected at the stated power


@dataclass
class Verdict:
    """A claim judged on one grid."""

    claim: Claim
    grid: str
    outcome: str  # HELD | NOT HELD | NOT MEASURED
    statistic: dict[str, float | None]  # the number(s) compared with the threshold(s)
    threshold: dict[str, Any]  # the parameter values used
    n_conditions: int  # conditions (or pairs) the statistic rests on
    n_distinct: int  # distinct solutions (pruned models, or evaluated sets for 3.3) it rests on
    reason: str  # one line: why this outcome
    details: list[dict[str, Any]] = field(default_factory=list)  # per condition, for the curious

    @property
    def measures(self) -> list[Measure]:
        """The statistic as measures: ``<name>_low``, ``_high`` and ``_mde`` keys join ``<name>``'s,
        so a report shows value, interval and MDE in columns of their own."""
        parts = ("low", "high", "mde")
        out: dict[str, dict[str, Any]] = {}
        for key, value in self.statistic.items():
            base, _, part = key.rpartition("_")
            if part in parts and base in self.statistic:
                out.setdefault(base, {})[part] = value
            else:
                out.setdefault(key, {})["value"] = value
        return [Measure(name, d.get("value"), d.get("low"), d.get("high"), d.get("mde")) for name, d in out.items()]


class ClaimRegistry(dict[str, Claim]):
    """``id -> Claim``, in the order of claims.toml's sections. Claims are instances, not classes,
    so :class:`depthprune.common.plugins.Registry` (a class decorator) does not fit; its
    :func:`depthprune.common.plugins.discover` fills this one too."""

    def register(self, claim: Claim) -> Callable[[Judge], Judge]:
        """Decorator of a judge: ``claim`` with that judge becomes ``CLAIMS[claim.id]``."""
        def decorate(judge: Judge) -> Judge:
            other = self.get(claim.id)
            if other is not None and other.judge is not judge:
                where = getattr(other.judge, "__module__", "?"), getattr(other.judge, "__qualname__", "?")
                raise ValueError(f"claim {claim.id!r} is registered twice: by {'.'.join(where)} and by "
                                 f"{judge.__module__}.{judge.__qualname__}")
            self[claim.id] = replace(claim, judge=judge)
            return judge
        return decorate

    def discover(self, package: str, skip: tuple[str, ...]) -> None:
        """Import every claim module of ``package``, then order the claims as claims.toml does (a
        claim without a section there goes last, and
        :func:`depthprune.report.claims.base.load_thresholds` then refuses the file)."""
        discover(package, skip)
        order = list(tomllib.loads(THRESHOLDS_FILE.read_text()))
        ranked = sorted(self.values(), key=lambda c: order.index(c.id) if c.id in order else len(order))
        self.clear()
        self.update((c.id, c) for c in ranked)


CLAIMS = ClaimRegistry()
register = CLAIMS.register


def verdict(claim_id: str, grid: str, held: bool | None, statistic: Mapping[str, float | None],
            threshold: dict[str, Any], n_conditions: int, n_distinct: int, reason: str,
            details: list[dict[str, Any]] | None = None) -> Verdict:
    """A judge's verdict: ``held`` True, False or None (not measured)."""
    outcome = NOT_MEASURED if held is None else HELD if held else NOT_HELD
    return Verdict(CLAIMS[claim_id], grid, outcome, dict(statistic), threshold, n_conditions, n_distinct, reason,
                   details or [])


# -- thresholds ------------------------------------------------------------------------------------

GENERAL = ("ppl_objective", "margin_objective", "searchers", "oneshot", "min_searchers")


def load_thresholds(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The thresholds file, checked: every claim's parameters present, nothing unknown."""
    path = Path(path) if path is not None else THRESHOLDS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no thresholds file (it ships in report/ beside the claims package; a "
                                "wheel install needs report/claims.toml in pyproject's package data)")
    data = tomllib.loads(path.read_text())
    known = {"general", "sweep", *CLAIMS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown section(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
    for section, names in (("general", GENERAL), *((c.id, c.parameters) for c in CLAIMS.values())):
        got = data.get(section, {})
        missing = [n for n in names if n not in got]
        extra = sorted(set(got) - set(names))
        if missing or extra:
            raise ValueError(f"{path}: [{section}] missing {', '.join(missing) or 'nothing'}; "
                             f"unknown {', '.join(extra) or 'nothing'}")
    for claim_id, sweep in data.get("sweep", {}).items():
        if claim_id not in CLAIMS or sweep.get("param") not in CLAIMS[claim_id].parameters:
            raise ValueError(f"{path}: [sweep] {claim_id!r}: not a claim, or param {sweep.get('param')!r} not one "
                             "of its parameters")
    return data


def with_threshold(thresholds: Mapping[str, Any], claim_id: str, param: str, value: Any) -> dict[str, Any]:
    """A copy of ``thresholds`` with one parameter changed (``general.x`` names a general one)."""
    out = copy.deepcopy(dict(thresholds))
    section, _, name = param.rpartition(".")
    section = section or claim_id
    if name not in out.get(section, {}):
        raise KeyError(f"[{section}] has no parameter {name!r}")
    out[section][name] = value
    return out


# -- every claim, and one claim across a range of a threshold ----------------------------------------

def judge_all(results: Iterable[Result], thresholds: Mapping[str, Any] | None = None) -> list[Verdict]:
    """Every claim on every grid, ordered by grid, then claim."""
    results = list(results)
    t = thresholds if thresholds is not None else load_thresholds()
    order = list(CLAIMS)
    verdicts = [v for c in CLAIMS.values() for v in c.verdicts(results, t)]
    return sorted(verdicts, key=lambda v: (v.grid, order.index(v.claim.id)))


def sensitivity(results: Iterable[Result], claim_id: str, param: str, values: Sequence[Any],
                thresholds: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """How the verdict moves as one threshold moves: a row per (grid, value)."""
    results = list(results)
    t = thresholds if thresholds is not None else load_thresholds()
    rows = []
    for value in values:
        for v in CLAIMS[claim_id].verdicts(results, with_threshold(t, claim_id, param, value)):
            rows.append({"grid": v.grid, "claim": claim_id, "param": param, "value": value,
                         "outcome": v.outcome, "statistic": dict(v.statistic)})
    return sorted(rows, key=lambda r: r["grid"])  # stable: values keep their order within a grid
