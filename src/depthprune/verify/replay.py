"""Replay: a cell's searcher run again on its own recorded trace, with no model.

A result records every set its searcher scored, in order, with its loss (``trace``), the prior it
was handed, its parameters and its seed. Replay builds a score function that answers from that
trace and runs the same searcher with the same arguments. Since a searcher sees nothing but
``score`` (and, for two of them, one more recorded reading), the code path is checked without the
model: the run must ask for exactly the recorded sets, in the recorded order, and return the
recorded set, loss and evaluation count. Any other request is the first disagreement, reported with
its position, and the cell fails.

What a searcher reads besides ``score`` must be recorded for it to replay:

* ``bi`` reads the dense model's Block Influence, recorded in ``search_info["block_influence"]``;
* ``cbo`` reads the model-derived quadratic energy ``(h, J)``, recorded in ``search_info["energy"]``
  since this module was written; an older result lacks it, so its energy solve is *not replayed*
  (said per cell), and only its final step is: the choice among the sets it re-scored;
* ``bo`` fits a GP (float64 L-BFGS) whose optimum is the numerics of the machine that ran it:
  refitting the archived tiny and real grids' bo cells on an AVX2-only EPYC proposed another set
  than the AMX run in 31 of 32 cells, after the initial design, and took 311 s. So bo records each
  fit's optimum (``search_info["gp_fits"]``: the GP's parameters) and a replay loads it instead of
  fitting (``score.recorded_gp``), which checks everything else bo does (initial design, pools,
  acquisition, picks) exactly and in milliseconds. An older result lacks them: its initial design is
  replayed, and the rest is *not replayed from evaluation k*, said per cell.

Replay also yields the searcher's decisions (:class:`Decision`), each a chosen set, its closest
rival and the gap between their recorded losses: the final one (the answer against the full-budget
set scored whose loss is closest to it), one per batch the searcher scored together (its best against the batch's
runner-up: greedy's and beam's steps, fbs's and cbo's candidate lists, GA's generations), and for a
searcher that used the prior, the prior's cut (the budget-th lowest single against the next). These
are what a re-measurement on another machine re-scores.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from depthprune.search import get_searcher
from depthprune.search.base import rank_key, set_key

#: replay outcomes, from best to worst
REPLAYED = "replayed"
PARTIAL = "partial"
FAILED = "failed"


class _NotRecorded(Exception):
    """The searcher needs a reading the result did not record (raised out of ``score.recorded_gp``)."""

    def __init__(self, position: int, what: str) -> None:
        super().__init__(position, what)
        self.position, self.what = position, what


class _Diverged(Exception):
    """The searcher asked for a set that is not the next recorded one (raised out of ``score``)."""

    def __init__(self, position: int, asked: frozenset[int], recorded: frozenset[int] | None) -> None:
        super().__init__(position, asked, recorded)
        self.position, self.asked, self.recorded = position, asked, recorded


@dataclass(frozen=True)
class Decision:
    """One comparison a searcher made: ``chosen`` won against ``rival`` by ``gap`` (recorded losses)."""

    kind: str  # "final" | "step" | "prior"
    chosen: tuple[int, ...]
    chosen_loss: float
    rival: tuple[int, ...]
    rival_loss: float
    position: int  # the evaluation (1-based) after which it was made; 0 for the prior

    @property
    def gap(self) -> float:
        """How far apart the two recorded losses are: the rounding it would take to swap them."""
        return abs(rank_key(self.rival_loss) - rank_key(self.chosen_loss))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "chosen": list(self.chosen), "chosen_loss": self.chosen_loss,
                "rival": list(self.rival), "rival_loss": self.rival_loss, "gap": self.gap,
                "position": self.position}


@dataclass
class Replay:
    """What replaying one cell showed."""

    grid: str
    cell: str
    searcher: str
    status: str  # REPLAYED | PARTIAL | FAILED
    recorded_evaluations: int
    replayed_evaluations: int  # recorded sets asked for in order before the end or the first difference
    seconds: float
    not_replayed: str | None = None  # which part was not replayed, and why (PARTIAL)
    disagreement: str | None = None  # the first disagreement (FAILED)
    decisions: list[Decision] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid, "cell": self.cell, "searcher": self.searcher, "status": self.status,
                "recorded_evaluations": self.recorded_evaluations,
                "replayed_evaluations": self.replayed_evaluations, "seconds": round(self.seconds, 4),
                "not_replayed": self.not_replayed, "disagreement": self.disagreement,
                "decisions": [d.to_dict() for d in self.decisions]}


def recorded_loss(value: Any) -> float:
    """A loss as a result stores it: null (non-finite) reads as +inf, the worst."""
    return math.inf if value is None else float(value)


class RecordedReads:
    """What a searcher reads besides losses, answered from a result's ``search_info`` (cbo's ``energy``,
    bi's ``block_influence``; JSON's nulls back to NaN and inf): the base of every score that stands in for
    the model on a recorded run (:class:`TraceScore`, :class:`depthprune.verify.rivals.TurnedScore`)."""

    def __init__(self, extras: Mapping[str, Any]) -> None:
        if "energy" in extras:
            h, j = extras["energy"]
            h = [math.nan if x is None else x for x in h]
            j = [[math.nan if x is None else x for x in row] for row in j]
            self.energy = lambda: (h, j)
        if "block_influence" in extras:
            influence = [math.inf if v is None else v for v in extras["block_influence"]]
            self.block_influence = lambda metric="cosine": list(influence)


class TraceScore(RecordedReads):
    """``score`` for a searcher, answered from a recorded trace in its recorded order.

    Batches (``many``) are kept as the searcher asked for them: each is one of its decisions.
    """

    def __init__(self, trace: Sequence[tuple[frozenset[int], float]], extras: dict[str, Any]) -> None:
        super().__init__(extras)
        self.trace = list(trace)
        self.position = 0  # how many recorded sets have been asked for, in order
        self.batches: list[tuple[int, list[frozenset[int]]]] = []  # (position after it, sets)
        self._gp_fits = extras.get("gp_fits")

    def recorded_gp(self, k: int) -> dict[str, Any]:
        """bo's k-th GP fit as recorded; a result without them stops the replay here (no refit: its
        optimum would be this machine's, and fitting costs seconds per evaluation)."""
        if self._gp_fits is None or k >= len(self._gp_fits):
            raise _NotRecorded(self.position + 1, "the GP fits of bo's later proposals (results before their "
                                                  "recording): its initial design replayed")
        return self._gp_fits[k]

    def _next(self, s: frozenset[int]) -> float:
        recorded = self.trace[self.position][0] if self.position < len(self.trace) else None
        if s != recorded:
            raise _Diverged(self.position + 1, s, recorded)
        loss = self.trace[self.position][1]
        self.position += 1
        return loss

    def __call__(self, s: frozenset[int]) -> float:
        loss = self._next(frozenset(s))
        self.batches.append((self.position, [frozenset(s)]))
        return loss

    def many(self, sets: Iterable[frozenset[int]]) -> list[float]:
        sets = [frozenset(s) for s in sets]
        losses = [self._next(s) for s in sets]
        self.batches.append((self.position, sets))
        return losses


def recorded_trace(result: Mapping[str, Any]) -> list[tuple[frozenset[int], float]]:
    """A result's trace as (set, loss) pairs, in its evaluation order."""
    return [(frozenset(s), recorded_loss(loss)) for s, loss in result.get("trace") or []]


def _prior(result: Mapping[str, Any]) -> list[float] | None:
    settings = result.get("settings") or {}
    if not settings.get("use_prior", True) or result.get("prior") is None:
        return None
    return [recorded_loss(x) for x in result["prior"]]


def decisions(result: Mapping[str, Any], batches: Sequence[tuple[int, Sequence[frozenset[int]]]] = ()
              ) -> list[Decision]:
    """The decisions of a result (module docstring): final, one per batch of two or more, and the prior's cut."""
    losses = {s: loss for s, loss in recorded_trace(result)}
    budget = len(result["removed"])
    chosen = frozenset(result["removed"])
    out: list[Decision] = []
    prior = _prior(result)
    if prior is not None and (result.get("search_info") or {}).get("used_given_prior") and 0 < budget < len(prior):
        protected = set((result.get("settings") or {}).get("protected") or ())
        order = sorted((i for i in range(len(prior)) if i not in protected), key=lambda i: (rank_key(prior[i]), i))
        last, nxt = order[budget - 1], order[budget]
        out.append(Decision("prior", (last,), prior[last], (nxt,), prior[nxt], 0))
    for position, sets in batches:
        if len(sets) < 2:
            continue
        ranked = sorted(sets, key=lambda s: set_key(s, losses[s]))
        out.append(Decision("step", tuple(sorted(ranked[0])), losses[ranked[0]], tuple(sorted(ranked[1])),
                            losses[ranked[1]], position))
    # the closest full-budget rival by loss: for a minimiser the runner-up, for ``rank`` its quantile's neighbour
    rivals = [s for s in losses if len(s) == budget and s != chosen]
    if rivals and chosen in losses:
        here = rank_key(losses[chosen])
        rival = min(rivals, key=lambda s: (abs(rank_key(losses[s]) - here), set_key(s, losses[s])))
        out.append(Decision("final", tuple(sorted(chosen)), losses[chosen], tuple(sorted(rival)), losses[rival],
                            len(losses)))
    return out


def _extras(result: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """What the searcher reads besides ``score`` (module docstring), and why a part cannot replay."""
    info = result.get("search_info") or {}
    extras: dict[str, Any] = {}
    if "block_influence" in info:
        extras["block_influence"] = info["block_influence"]
    if "energy" in info:
        extras["energy"] = (info["energy"]["h"], info["energy"]["J"])
    if "gp_fits" in info:
        extras["gp_fits"] = info["gp_fits"]
    if info.get("energy_source") == "score" and "energy" not in extras:
        return extras, ("the energy solve: this result does not record the model-derived energy (h, J) cbo read "
                        "(results before its recording); replayed: the final choice among its re-scored sets")
    return extras, None


def _check_final_choice(result: Mapping[str, Any], trace: Sequence[tuple[frozenset[int], float]]) -> str | None:
    """The recorded answer is the best full-budget set of the trace (cbo's last step), else what differs."""
    budget = len(result["removed"])
    full = [(s, loss) for s, loss in trace if len(s) == budget]
    if not full:
        return f"no set of {budget} layers in the trace"
    best = min(full, key=lambda sl: set_key(*sl))
    if sorted(best[0]) != sorted(result["removed"]):
        return (f"the best recorded set of {budget} layers is {sorted(best[0])} ({best[1]:.6g}), the result removed "
                f"{sorted(result['removed'])}")
    return None


def replay(result: Mapping[str, Any]) -> Replay:
    """Replay one cell result (module docstring)."""
    start = time.perf_counter()
    identity: Mapping[str, Any] = result["identity"]  # the stored form's (a Result's, or a bench test's record)
    name: str = identity.get("search") or ""
    trace = recorded_trace(result)
    out = Replay(grid=str(identity.get("grid")), cell=str(result.get("cell")), searcher=name,
                 status=REPLAYED, recorded_evaluations=len(trace), replayed_evaluations=0, seconds=0.0)
    extras, missing = _extras(result)
    score = TraceScore(trace, extras)
    if missing is not None:  # cbo without its energy: only the final choice is checked
        out.status, out.not_replayed = PARTIAL, missing
        out.disagreement = _check_final_choice(result, trace)
        if out.disagreement:
            out.status = FAILED
        out.replayed_evaluations = len(trace)
        score.batches.append((len(trace), [s for s, _ in trace]))
    else:
        params = dict(result.get("search_params") or {})
        searcher = get_searcher(name, **params)
        settings = result.get("settings") or {}
        seed = int(identity.get("search_seed", 0))
        torch.manual_seed(seed)  # as recipe.Calibration.search
        try:
            found = searcher.search(n_layers=int(result["n_layers"]), budget=len(result["removed"]), score=score,
                                    seed=seed, protected=frozenset(settings.get("protected") or ()),
                                    prior=_prior(result))
        except _NotRecorded as stop:
            out.replayed_evaluations = stop.position - 1
            out.status, out.not_replayed = PARTIAL, f"from evaluation {stop.position}: {stop.what}"
        except _Diverged as div:
            out.replayed_evaluations = div.position - 1
            recorded = sorted(div.recorded) if div.recorded is not None else "nothing (the trace had ended)"
            out.status = FAILED
            out.disagreement = f"evaluation {div.position}: asked for {sorted(div.asked)}, the trace recorded {recorded}"
        else:
            out.replayed_evaluations = score.position
            problems = []
            if score.position != len(trace):
                problems.append(f"asked for {score.position} of the {len(trace)} recorded sets")
            if list(found.removed) != sorted(result["removed"]):
                problems.append(f"removed {list(found.removed)}, recorded {sorted(result['removed'])}")
            if not _same_loss(found.loss, result.get("calibration_loss")):
                problems.append(f"loss {found.loss!r}, recorded {result.get('calibration_loss')!r}")
            recorded_evals = (result.get("cost") or {}).get("search_evaluations", len(trace))
            if found.evaluations != recorded_evals:
                problems.append(f"{found.evaluations} evaluations, recorded {recorded_evals}")
            if problems:
                out.status, out.disagreement = FAILED, "; ".join(problems)
    out.decisions = decisions(result, score.batches)
    out.seconds = time.perf_counter() - start
    return out


def _same_loss(a: float | None, b: float | None) -> bool:
    a, b = recorded_loss(a), recorded_loss(b)
    return a == b or (math.isnan(a) and math.isnan(b))
