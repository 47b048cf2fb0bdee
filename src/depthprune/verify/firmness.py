"""How firmly a cell's removed set is decided: which of its searcher's decisions rounding could turn.

A cell's answer rests on decisions (:class:`depthprune.verify.replay.Decision`, found by replaying its
recorded trace): the final choice against the closest full-budget rival, each step whose best a searcher
takes (``Searcher.batch_decides``: greedy's, beam's, fbs's, cbo's; not a chunk of an enumeration, GA's
population or BO's design), and the prior's cut where the searcher read the prior. A decision is *inside a
band* when its gap is within what rounding moved losses between two numeric classes
(:mod:`depthprune.verify.bands`, measured on held-out sets): on a machine of the other class it may come out
the other way. Two bands are asked of every cell made in bf16: **bf16 against fp32** (a CPU without AMX,
where ``auto`` runs float32) and **across kernels** (bf16 on the other CPU kernel class). Only a band
measured for the cell's own model and objective counts; a borrowed one is "not measured".

A cell inside a band has a known **rival answer** only where the sole decisions inside are its final one
(the answer is then that decision's rival) or oneshot's prior cut (the answer swaps the two singles). A step
inside a band leads to a path the trace does not hold: :mod:`depthprune.verify.rivals` follows it with the
model. REPORT's use of all this is :mod:`depthprune.report.firmness`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.results.schema import Result
from depthprune.search import SEARCHERS
from depthprune.verify.bands import load_table, loss_band, numeric_class
from depthprune.verify.replay import FAILED, PARTIAL, Decision, replay

#: the two bands asked of a cell: (label, the other numeric class, by the cell's own class)
BANDS: dict[str, dict[str, str]] = {
    "bf16 against fp32": {"bf16/amx": "fp32/cpu-avx512", "bf16/avx512-bf16": "fp32/cpu-avx512"},
    "across kernels": {"bf16/amx": "bf16/avx512-bf16", "bf16/avx512-bf16": "bf16/amx"},
}

#: the rivals file's format
RIVALS_SCHEMA = "depthprune-rivals/1"


FIRM = "firm"
INSIDE = "inside"
UNKNOWN = "not measured"


@dataclass(frozen=True)
class CellFirmness:
    """One cell under one band: its decisive decisions, those inside the band, and its rival answer."""

    grid: str
    cell: str
    condition: tuple[str, str, int]  # model, objective, budget
    search: str
    status: str  # FIRM | INSIDE | UNKNOWN
    why: str = ""  # for UNKNOWN: why no band or no decisions
    partial: bool = False  # the replay covered only part of the run (older archives)
    smallest: Decision | None = None  # the decisive decision with the smallest gap relative to its band
    smallest_band: float | None = None
    inside: tuple[Decision, ...] = ()
    rival: tuple[int, ...] | None = None  # the answer had the decisions inside come out the other way

    @property
    def ratio(self) -> float:
        """The smallest decisive gap ÷ its band (at most 1 inside the band); inf where not measured."""
        if self.smallest is None or not self.smallest_band:
            return math.inf
        return self.smallest.gap / self.smallest_band


def decisive(result: Result, decisions: Sequence[Decision]) -> list[Decision]:
    """The decisions that can change the answer (module docstring)."""
    search = result.identity.search
    batch_decides = SEARCHERS[search].batch_decides if search in SEARCHERS else True
    return [d for d in decisions if d.kind != "step" or batch_decides]


def _decision_band(table_: Mapping[str, Any], recorded: str, other: str, result: Result,
          d: Decision) -> float | None:
    loss = max(abs(d.chosen_loss), abs(d.rival_loss))
    b = loss_band(table_, recorded, other, result.identity.objective, result.identity.model, loss)
    return None if b is None or b.flagged or not math.isfinite(b.nats) else b.nats


def known_rival(result: Result, inside: Sequence[Decision]) -> tuple[int, ...] | None:
    """The answer had ``inside`` turned, where it needs no search: the final decision's rival, or the prior's
    cut turned where the searcher answers it (:meth:`~depthprune.search.base.Searcher.turned_cut_answer`); None where a turned step would need the search followed."""
    kinds = {d.kind for d in inside}
    if kinds == {"final"}:
        return inside[0].rival
    if kinds == {"prior"}:
        d = inside[0]
        return SEARCHERS[str(result.identity.search)].turned_cut_answer(result["removed"], d.chosen, d.rival)
    return None


def cell_firmness(result: Result, decisions: Sequence[Decision], status: str, band: str,
                  table_: Mapping[str, Any]) -> CellFirmness:
    """``result`` under ``band`` (a key of :data:`BANDS`), given its replay's decisions and status."""
    base = {"grid": result.identity.grid, "cell": result["cell"],
            "condition": (result.identity.model, result.identity.objective, int(result.identity.budget)),
            "search": result.identity.search}
    recorded = numeric_class(result.get("environment") or {})
    other = BANDS[band].get(recorded)
    if other is None:
        return CellFirmness(**base, status=UNKNOWN, why=f"made in {recorded}: no such band asked of it")
    if status == FAILED:
        return CellFirmness(**base, status=UNKNOWN, why="its trace does not replay")
    scored: list[tuple[float, Decision, float]] = []
    for d in decisive(result, decisions):
        width = _decision_band(table_, recorded, other, result, d)
        if width is None:
            return CellFirmness(**base, status=UNKNOWN,
                                why=f"no band measured for {recorded} against {other}, {result.identity.objective}, "
                                    f"{result.identity.model}")
        scored.append((d.gap / width if width > 0 else math.inf, d, width))
    if not scored:
        return CellFirmness(**base, status=UNKNOWN, why="no decision to weigh (one set scored)")
    ratio, smallest, width = min(scored, key=lambda x: (x[0], x[1].position))
    inside = tuple(d for r, d, _ in scored if r <= 1.0)
    return CellFirmness(**base, status=INSIDE if inside else FIRM, partial=status == PARTIAL, smallest=smallest,
                        smallest_band=width, inside=inside, rival=known_rival(result, inside) if inside else None)


def assess(results: Sequence[Result], table_: Mapping[str, Any] | None = None
           ) -> dict[str, list[CellFirmness]]:
    """Every result under every band, in the order given."""
    t = table_ if table_ is not None else load_table()
    replays = [replay(r) for r in results]
    return {band: [cell_firmness(r, rep.decisions, rep.status, band, t) for r, rep in zip(results, replays)]
            for band in BANDS}


def decision_key(d: Decision) -> str:
    """A decision's identity in a rivals file: its kind, position and the two sides."""
    return f"{d.kind}@{d.position}:{list(d.chosen)}>{list(d.rival)}"


def turned(c: CellFirmness) -> Decision | None:
    """The decision whose turning gives the cell's rival answer: its first decisive one inside the band."""
    return min(c.inside, key=lambda d: (d.position, d.kind != "prior")) if c.inside else None


def read_rivals(paths: Iterable[str | Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """(cell, decision key) -> rival record, from every rivals file given that exists."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for p in paths:
        p = Path(p)
        if p.exists():
            data = read_json(p)
            if data.get("schema") != RIVALS_SCHEMA:
                raise ValueError(f"{p}: schema {data.get('schema')!r}, expected {RIVALS_SCHEMA!r}")
            for x in data["rivals"]:
                out[(x["cell"], x["decision_key"])] = {**x, "grid": data["grid"]}
    return out
