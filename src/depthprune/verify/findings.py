"""Findings: failures a rule fixed beforehand reported, kept so that every check reports them the same way.

A band rule is written down before it runs, and never widened to make a cell pass (docs/verify.md). When its
first run fails a cell whose code did not change (the cell reproduces exactly on its recorded class), the
failure is a *finding* about rounding, recorded here with what was measured. A check that fails on exactly a
finding's sets, and on nothing else, reports the finding as an expected failure (pytest's xfail, which
``-ra`` prints with its reason), in the grid's check and in CI's verify alike, so both give the cell the same
verdict; any other set outside its band, any decision that turned, any other cell, fails as before. A
finding that stops reproducing (its sets pass) lets the check pass: nothing depends on the failure.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from depthprune.verify import evaluation as ev
from depthprune.verify.remeasure import FAILED, CellCheck


@dataclass(frozen=True)
class Finding:
    """A cell whose check across numeric classes fails on ``sets`` under ``rule``: rounding, shown not to be
    a change of the code, that the rule's bands do not cover."""

    cell: str
    sets: tuple[tuple[int, ...], ...]  # the sets outside their bands, each sorted
    recorded: str  # the recorded numeric class (bands.numeric_class)
    rule: int  # the band rule that fails them
    what: str  # what was measured, where and when (docs/verify.md has the run)

    def explains(self, cell: str, recorded: str, failed: Collection[frozenset[int]]) -> bool:
        """Whether a check of ``cell`` recorded in ``recorded`` that failed on ``failed`` (and on nothing
        else) failed as this finding does: the same cell and class, and only the finding's sets."""
        return (cell == self.cell and recorded == self.recorded and bool(failed)
                and {tuple(sorted(s)) for s in failed} <= set(self.sets))


FINDINGS: tuple[Finding, ...] = (
    Finding(
        cell="gemma3-270m-margin-oneshot-M4", sets=((1,),), recorded="bf16/amx", rule=5,
        what="the single that removes gemma3-270m's block 1 (the margin loss moves from -17.69 to -1.49, "
             "16 nats) measured -1.82171 in float32 on an Intel CPU's AVX-512 kernels, -1.82174 on an AMD "
             "EPYC's, -2.01078 in bf16 on AVX512-BF16 kernels, against -1.48921 recorded in bf16 on AMX, "
             "where it reproduces: rule 5's band 0.317 nats (its weight 1.92; z 4.26 for the 2,471 checks of "
             "its fold) is passed by 1.05x, z 4.5; its weighted difference is 2.6x the next largest of the "
             "condition's 51 measuring sets. Re-checked in bf16 here (the second opinion) it fails again on "
             "AVX512-BF16 kernels and verifies on ATen's emulated bf16 (an AVX2-only CPU). Rounding on a model "
             "that removing block 1 breaks is heavy-tailed beyond what the distance from the dense loss scales "
             "(rule 5's first run, 2026-12-06, docs/verify.md)"),
)


def explaining(cell: str, recorded: str, failed: Collection[frozenset[int]]) -> Finding | None:
    """The finding that explains a check's failure on ``failed`` alone, or None."""
    return next((f for f in FINDINGS if f.explains(cell, recorded, failed)), None)


def finding_of(check: CellCheck) -> Finding | None:
    """The finding a FAILED ``depthprune verify`` check of a cell is: in this machine's precision only the
    finding's sets outside their bands, no decision turned, no evaluation outside its band; None otherwise.
    A second opinion in the recorded precision can only settle a failure (the cell is then not FAILED); one
    that fails too adds nothing to what the first check already showed of the other sets, and its bands were
    measured on other kernels of its class than this machine's, where this machine's kernels differ."""
    if check.status != FAILED or check.turned or (check.evaluation is not None and check.evaluation.status == ev.FAILED):
        return None
    return explaining(check.cell, check.recorded_class, check.failed_sets)
