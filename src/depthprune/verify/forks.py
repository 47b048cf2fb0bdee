"""A grid cell against a reference made in another precision or on other kernels: a numeric fork or a change.

The exact check (:func:`depthprune.grid.reference.compare`) holds a cell to a reference of its own precision.
Across precisions or kernel classes it cannot: rounding moves every loss a little, and a decision the
calibration left nearly tied may turn, so the removed set differs without any code having changed. This
module checks such a cell against the reference's *archived run* (the archive's result of the same cell
whose removed set and calibration loss are the reference's; its trace holds every set it scored) with the
bands of :mod:`depthprune.verify.bands` for the two numeric classes:

* **every set both runs scored** (dense, singles, trace) must agree within its band (rule 5: scaled by the
  set's distance from the dense loss, measured on the other fold); a loss outside it is a change, not
  rounding, and the cell fails. ``depthprune verify`` compares the same sets the same way
  (:func:`depthprune.verify.losses.compare_losses`), so the two checks give a cell one verdict on its losses;
* **the same removed set**: its item outcomes and perplexity windows, all of them, are held to the
  evaluation band of the pair (rule E2 of :mod:`depthprune.verify.evaluation`);
* **another removed set**: both runs are replayed (:mod:`depthprune.verify.replay`) and the first decision
  where they part is found. Both sides of it were scored in both runs (the runs asked for the same sets up
  to there). If the reference's gap there is within the band, the cell passes as a **numeric fork**,
  reported with the decision, both gaps and the band; otherwise it fails. Metrics belong to another model
  then and are not compared. Where no listed decision turned (GA's selection or BO's GP read more than a
  best-against-runner-up), the first request where the traces part is reported, and the shared losses'
  agreement within their bands is what the pass rests on.

Decisions are not stored twice: the archived trace and replay give them exactly (DESIGN.md, "Numeric forks").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthprune.common.machine import switch
from depthprune.model.precision import dtype_name
from depthprune.results.archive import SUFFIX, read_archive
from depthprune.results.schema import Result
from depthprune.verify import evaluation as ev
from depthprune.verify.bands import numeric_class
from depthprune.verify.findings import Finding, explaining
from depthprune.verify.losses import compare_losses, run_losses
from depthprune.verify.remeasure import VERIFIED, CellCheck, set_bands
from depthprune.verify.replay import PARTIAL, REPLAYED, Decision, recorded_trace, replay

#: ``off`` keeps a cell whose only references are of another precision skipping instead of checking it here
#: (CI sets it: two real cells checked across precisions cost a CPU without AMX 5-10 min of a worker)
ENV = "DEPTHPRUNE_ACROSS"


def across_enabled() -> bool:
    """False when ``DEPTHPRUNE_ACROSS`` is ``off`` (also ``0``, ``false``, ``no``); a bad value raises."""
    return switch(ENV)


def archived_run(reference: Mapping[str, Any], archives: Iterable[str | Path]) -> Result | None:
    """The archived result that ``reference`` was made from: the same cell, dtype, removed set and
    calibration loss (bit for bit), in any of ``archives`` (``.jsonl.xz`` files or folders of them)."""
    paths: list[Path] = []
    for a in archives:
        a = Path(a)
        paths += sorted(a.glob(f"*{SUFFIX}")) if a.is_dir() else [a] if a.is_file() else []
    for path in paths:
        for kind, _, data in read_archive(path):
            if (kind == "result" and data.get("cell") == reference["cell"]
                    and not (data.get("identity") or {}).get("heal")  # a healed result keeps its set and loss
                    and dtype_name((data.get("environment") or {}).get("dtype")) == reference.get("dtype")
                    and sorted(data["removed"]) == sorted(reference["removed"])
                    and data["calibration_loss"] == reference["calibration_loss"]):
                return Result.of(data)
    return None


@dataclass(frozen=True)
class RunsFork:
    """Where a run here and the reference's run part, and by how much each preferred its side."""

    kind: str  # the decision's kind ("step", "final", "prior"), or "trace" when no listed decision turned
    position: int  # the evaluation after which the runs part
    reference_set: tuple[int, ...]
    here_set: tuple[int, ...]
    reference_gap: float | None  # the reference's losses: how far its side was ahead (None: not both scored)
    here_gap: float | None
    band: float | None  # the band of the wider of the two sides

    def describe(self) -> str:
        def g(x: float | None) -> str:
            return "-" if x is None else f"{x:.3g}"
        return (f"{self.kind} decision after evaluation {self.position}: reference chose {list(self.reference_set)}, "
                f"here {list(self.here_set)}; gap in the reference's losses {g(self.reference_gap)}, here "
                f"{g(self.here_gap)}, band {g(self.band)} nats")


@dataclass
class ForkCheck:
    """The outcome: ``problems`` empty means the cell passes (as the same set, or as a numeric fork)."""

    recorded_class: str
    here_class: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fork: RunsFork | None = None
    sets_compared: int = 0
    not_checkable: str | None = None  # why the check cannot decide (then the cell skips, saying so)
    failed_sets: list[frozenset[int]] = field(default_factory=list)  # every shared set outside its band
    sets_problem: str | None = None  # the first of them, as it stands in ``problems``

    def settled_in_recorded_precision(self, second: str) -> None:
        """The shared sets' failure was settled by a second opinion in the recorded precision (``second``
        says how): it leaves the problems, and a note says what the first check found."""
        if self.sets_problem in self.problems:
            self.problems.remove(self.sets_problem)
            self.notes.append(f"in this machine's precision: {self.sets_problem}; in the recorded one: {second}")


def settle(check: ForkCheck, cell: str, second: CellCheck | None) -> Finding | None:
    """Fold a second opinion of the reference's run in its recorded precision (``second``:
    :func:`depthprune.verify.remeasure.second_opinion`, asked where shared sets failed) into ``check``, as
    ``depthprune verify`` folds one into a cell's check: verified, it settles the sets' failure (a difference of
    precision alone); failed too, the failure stands. Returns the finding (:mod:`depthprune.verify.findings`)
    that is then all that is left of the check's problems, or None (as :func:`~depthprune.verify.findings.finding_of`
    reads a verify check)."""
    if second is not None and second.status == VERIFIED:
        check.settled_in_recorded_precision(f"{second.label} on {second.here_class}")
    if not check.problems or check.problems != [check.sets_problem]:
        return None
    return explaining(cell, check.recorded_class, check.failed_sets)


def _parting(here: Sequence[Decision], ref: Sequence[Decision]) -> tuple[Decision, Decision] | None:
    for h, r in zip(here, ref):
        if (h.kind, h.position) != (r.kind, r.position):
            return None
        if h.chosen != r.chosen:
            return h, r
    return None


def _first_difference(here: Result, ref: Result) -> int:
    a, b = recorded_trace(here), recorded_trace(ref)
    for k, ((s, _), (t, _)) in enumerate(zip(a, b)):
        if s != t:
            return k
    return min(len(a), len(b))


def check_across(result: Result, reference_run: Result, table: Mapping[str, Any]) -> ForkCheck:
    """``result`` (run here) against ``reference_run`` (the reference's archived run) under ``table``'s bands."""
    rc, hc = numeric_class(reference_run["environment"]), numeric_class(result["environment"])
    check = ForkCheck(rc, hc)
    objective = result.identity.objective
    band = set_bands(table, rc, hc, reference_run)
    own = band(frozenset(reference_run["removed"]), float(reference_run["calibration_loss"]))
    if own is None:
        check.problems.append(f"no band measured for {rc} against {hc} ({objective}): rounding cannot be told "
                              "from a change")
        return check
    if own.flagged:
        check.notes.append(own.flagged)
    partial = None
    replays = {name: replay(run) for name, run in (("here", result), ("reference", reference_run))}
    for name, rep in replays.items():
        if name == "reference" and rep.status == PARTIAL:  # archived before its searcher recorded what it read
            partial = f"the reference's archived run replays only in part ({rep.not_replayed})"
        elif rep.status != REPLAYED:
            check.problems.append(f"the {name} run does not replay: {rep.disagreement or rep.not_replayed}")
    if check.problems:
        return check
    mine, theirs = run_losses(result), run_losses(reference_run)
    seen = compare_losses(theirs, mine, band)
    check.sets_compared, check.failed_sets = seen.sets_compared, seen.failed
    if seen.failure is not None:  # the rest is still checked: a second opinion may settle the sets, not the rest
        check.sets_problem = seen.failure.replace("recorded loss", "reference loss", 1)
        check.problems.append(check.sets_problem)
    if seen.no_band is not None:
        check.not_checkable = f"{seen.no_band}: rounding cannot be told from a change"
        return check
    if sorted(result["removed"]) == sorted(reference_run["removed"]):
        if partial:
            check.notes.append(partial)
        _check_evaluation(check, result, reference_run, table)
        return check
    if partial:
        check.not_checkable = f"{partial}: where the runs part cannot be found"
        return check
    parting = _parting(replays["here"].decisions, replays["reference"].decisions)
    if parting is None:
        k = _first_difference(result, reference_run)
        check.fork = RunsFork("trace", k, tuple(sorted(reference_run["removed"])), tuple(sorted(result["removed"])),
                          None, None, None)
        check.notes.append(f"numeric fork: the runs ask for other sets from evaluation {k + 1} on, with no listed "
                           f"decision turned before; every one of the {check.sets_compared} sets both scored agrees "
                           "within its band; metrics not compared (another model)")
        return check
    h, r = parting
    a, b_ = frozenset(r.chosen), frozenset(h.chosen)
    ref_gap = abs(theirs[b_] - theirs[a]) if a in theirs and b_ in theirs else None
    here_gap = abs(mine[a] - mine[b_]) if a in mine and b_ in mine else None
    widths = [x.nats for x in (band(a, theirs[a]) if a in theirs else None, band(b_, theirs[b_]) if b_ in theirs
                               else None) if x is not None]
    width = max(widths) if widths else None
    check.fork = RunsFork(r.kind, r.position, r.chosen, h.chosen, ref_gap, here_gap, width)
    if ref_gap is None or width is None or ref_gap > width:
        check.problems.append(f"removed {sorted(result['removed'])} vs reference {sorted(reference_run['removed'])}: "
                              f"a decision outside the band turned: {check.fork.describe()}")
    else:
        check.notes.append(f"numeric fork: removed {sorted(result['removed'])} vs reference "
                           f"{sorted(reference_run['removed'])}: {check.fork.describe()}; metrics not compared "
                           "(another model)")
    return check


def _check_evaluation(check: ForkCheck, result: Result, reference_run: Result,
                      table: Mapping[str, Any]) -> None:
    """The same removed set: every item outcome and window here against the reference run's, under rule E2."""
    items = {task: {metric: dict(enumerate(int(c) for c in outcomes)) for metric, outcomes in per_metric.items()}
             for task, per_metric in (result.get("item_outcomes") or {}).items()}
    windows = {name: dict(enumerate(values)) for name, values in (result.get("window_nll") or {}).items()}
    if not items and not windows:
        check.notes.append("same removed set; no per-item outcomes or windows recorded here: metrics not compared")
        return
    common_items = {t: m for t, m in items.items() if t in (reference_run.get("item_outcomes") or {})}
    common_windows = {n: w for n, w in windows.items() if n in (reference_run.get("window_nll") or {})}
    seen = ev.check_evaluation(reference_run, ev.Measured(common_items, common_windows),
                               ev.evaluation_band(table, check.recorded_class, check.here_class, result.identity.model,
                                         result["removed"]))
    line = (f"same removed set; {seen.items} items ({seen.disagreements} disagree, {seen.allowed} allowed) and "
            f"{seen.windows} windows against the reference run's (rule {ev.RULE})")
    if seen.status == ev.FAILED:
        check.problems.append(f"{line}: {seen.disagreement}")
    elif seen.status == ev.NOT_VERIFIED:
        check.notes.append(f"{line}: metrics not compared: {seen.disagreement}")
    else:
        check.notes.append(line)
