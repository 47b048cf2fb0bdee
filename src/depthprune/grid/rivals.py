"""The rival answers of cells whose removed set rests on a decision inside a rounding band, found and
evaluated with the model, so that REPORT can re-judge the verdicts with them (``depthprune measure rivals``).

For each archived cell of a grid that is inside a band (:mod:`depthprune.verify.firmness`), the decision
*turned* is its first decisive one inside the band (the earliest: the prior's cut, then by evaluation). The
answer had rounding turned that decision, and no other:

* its **final** decision: the rival set, with its recorded loss;
* **oneshot's prior cut**: the cut's two singles swapped;
* anything else (a step, or the cut of a searcher that starts from the prior): the searcher is **followed**.
  It runs again with the cell's parameters, seed and protected layers, on a score that answers every set the
  cell recorded with its recorded loss, except that the turned decision's two sides swap losses (in the prior
  too, for a cut); a set the cell never scored is computed here with the model. Where the run asks only for
  recorded sets it is the same path in the reference's own numbers; where it leaves them, the new sets are
  this machine's.

The rival set is then evaluated here with the grid's evaluation (its cache shared with the grid runner's).
Its metrics are this machine's, another numeric class than the archived ones: the evaluation bands (rule E2)
say how far apart those can be, and the rivals file records the machine and each rival's provenance.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from depthprune.env import environment
from depthprune.grid.cases import Grid
from depthprune.grid.runner import GridRunner, objective_params
from depthprune.jsonio import read_json, write_json_atomic
from depthprune.result import Result
from depthprune.search import get_searcher
from depthprune.verify.firmness import (
    BANDS,
    INSIDE,
    RIVALS_SCHEMA,
    cell_firmness,
    decision_key,
    known_rival,
    rivals_path,
    turned,
)
from depthprune.verify.replay import Decision, RecordedReads, recorded_loss, recorded_trace, replay


class TurnedScore(RecordedReads):
    """``score`` for a followed search: recorded losses (the turned decision's two sides swapped), the
    model for the rest (``compute``), and what the cell's searcher read besides (energy, influence)."""

    def __init__(self, recorded: Mapping[frozenset[int], float], swap: tuple[frozenset[int], frozenset[int]],
                 compute: Callable[[frozenset[int]], float], extras: Mapping[str, Any]) -> None:
        super().__init__(extras)
        self.losses = dict(recorded)
        a, b = swap
        if a in self.losses and b in self.losses:
            self.losses[a], self.losses[b] = self.losses[b], self.losses[a]
        self.compute = compute
        self.computed: list[frozenset[int]] = []

    def __call__(self, s: Iterable[int]) -> float:
        s = frozenset(s)
        if s not in self.losses:
            self.losses[s] = self.compute(s)
            self.computed.append(s)
        return self.losses[s]

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]


def follow(result: Result, decision: Decision, compute: Callable[[frozenset[int]], float]
           ) -> tuple[list[int], float, int]:
    """The cell's searcher run again with ``decision`` turned (module docstring): (removed, loss, sets
    computed here)."""
    recorded: dict[frozenset[int], float] = dict(recorded_trace(result))
    prior = [recorded_loss(v) for v in result.get("prior") or []]
    for i, v in enumerate(prior):
        recorded.setdefault(frozenset([i]), v)
    swap = (frozenset(decision.chosen), frozenset(decision.rival))
    if decision.kind == "prior":
        (i,), (j,) = decision.chosen, decision.rival
        prior[i], prior[j] = prior[j], prior[i]
    info = result.get("search_info") or {}
    extras: dict[str, Any] = {}
    if "energy" in info:
        extras["energy"] = (info["energy"]["h"], info["energy"]["J"])
    if "block_influence" in info:
        extras["block_influence"] = info["block_influence"]
    score = TurnedScore(recorded, swap, compute, extras)
    settings = result.get("settings") or {}
    seed = int(result.identity.search_seed)
    searcher = get_searcher(str(result.identity.search), **dict(result.get("search_params") or {}))
    torch.manual_seed(seed)  # as recipe.Calibration.search
    found = searcher.search(n_layers=int(result["n_layers"]), budget=len(result["removed"]), score=score,
                            seed=seed, protected=frozenset(settings.get("protected") or ()),
                            prior=prior if settings.get("use_prior", True) and result.get("prior") is not None else None)
    return sorted(found.removed), float(found.loss), len(score.computed)


def wanted(results: Sequence[Result], table: Mapping[str, Any]
           ) -> list[tuple[Result, Decision, list[str]]]:
    """(result, turned decision, bands) for every cell inside a band, one entry per distinct decision."""
    out: dict[tuple[str, str], tuple[Result, Decision, list[str]]] = {}
    for r in results:
        rep = replay(r)
        for band in BANDS:
            c = cell_firmness(r, rep.decisions, rep.status, band, table)
            d = turned(c) if c.status == INSIDE else None
            if d is not None:
                out.setdefault((str(r["cell"]), decision_key(d)), (r, d, []))[2].append(band)
    return list(out.values())


def measure(grid: Grid, results: Sequence[Result], table: Mapping[str, Any], work_dir: str | Path,
            out: str | Path, command: str, progress: bool = True, limit: int | None = None) -> dict[str, Any]:
    """Find and evaluate every rival of ``results`` (one grid's archived cells); write ``out`` after each
    (an interrupted run keeps what it did and resumes from it)."""
    out = Path(out)
    done: dict[str, Any] = read_json(out) if out.exists() else {}
    if done.get("schema") != RIVALS_SCHEMA or done.get("grid") != grid.name:
        done = {"schema": RIVALS_SCHEMA, "grid": grid.name, "command": command, "environment": environment(), "rivals": []}
    have = {(x["cell"], x["decision_key"]) for x in done["rivals"]}
    todo = [w for w in wanted(results, table) if (str(w[0]["cell"]), decision_key(w[1])) not in have]
    todo.sort(key=lambda w: (w[0].identity.model, w[0].identity.objective, str(w[0]["cell"])))
    todo = todo[:limit] if limit is not None else todo
    runner = GridRunner(work_dir)
    for r, d, bands in tqdm(todo, desc=f"rivals of {grid.name}", disable=not progress):
        cell = grid.cell(str(r["cell"]))
        session = runner.session(grid, cell.model)
        calib = session.calibrate(cell.objective, **objective_params(grid, cell))
        start = time.perf_counter()
        known = known_rival(r, [d])
        if known is not None:
            removed, how, computed = list(known), "final" if d.kind == "final" else "cut", 0
            loss = d.rival_loss if d.kind == "final" else calib.scorer(frozenset(known))
        else:
            removed, loss, computed = follow(r, d, calib.scorer)
            how = "followed"
        search_seconds = time.perf_counter() - start
        record: dict[str, Any] = {
            "cell": r["cell"], "model": r.identity.model, "objective": r.identity.objective,
            "search": r.identity.search,
            "bands": bands, "decision_key": decision_key(d), "decision": d.to_dict(), "how": how,
            "removed": removed, "calibration_loss": loss, "same_set": removed == sorted(r["removed"]),
            "sets_computed_here": computed, "search_seconds": round(search_seconds, 3)}
        if not record["same_set"]:  # the same set needs no evaluation: the cell's own stands
            evaluation = session.evaluate(tuple(removed), grid.eval_config(session.profile),
                                          cache_dir=runner.eval_cache())
            record.update({"metrics": evaluation.metrics, "item_outcomes": evaluation.items,
                           "item_clusters": evaluation.clusters, "window_nll": evaluation.windows,
                           "evaluation_protocol": evaluation.protocol, "evaluated": True,
                           "eval_seconds": round(evaluation.seconds, 3), "eval_cached": evaluation.cached})
        done["environment"] = environment(session.device, str(session.dtype))
        done["rivals"].append(record)
        done["rivals"].sort(key=lambda x: (x["cell"], x["decision_key"]))
        write_json_atomic(out, done)
    runner.close()
    return done


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grid", required=True, help="the grid whose archived cells' rivals to find (a case file's name)")
    p.add_argument("--archive", default="archive", help="the archive directory (default: archive)")
    p.add_argument("--cases", default="cases", help="the case files (default: cases)")
    p.add_argument("--work", default="results",
                   help="a results directory whose evaluation cache and score store the runs share (default: results)")
    p.add_argument("--out", default=None, help="the rivals file (default: ARCHIVE/rivals-GRID.json); a partial one "
                                               "is resumed")
    p.add_argument("--limit", type=int, default=None, help="at most this many rivals this run (the rest next run)")


def run(args: argparse.Namespace) -> int:
    from depthprune.cli.errors import UsageError
    from depthprune.grid.archive import SUFFIX, read_archive
    from depthprune.grid.cases import CaseFileError, load_grids
    from depthprune.verify.bands import load_table

    try:
        grids = {g.name: g for g in load_grids(args.cases)}
    except (CaseFileError, FileNotFoundError) as err:
        raise UsageError(f"--cases {args.cases}: {err}") from None
    if args.grid not in grids:
        raise UsageError(f"--grid {args.grid!r}: no such grid in {args.cases}; allowed: {', '.join(sorted(grids))}")
    archive = Path(args.archive) / f"{args.grid}{SUFFIX}"
    if not archive.is_file():
        raise UsageError(f"--archive {args.archive}: no {archive.name} (archive the grid first: depthprune archive)")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit {args.limit}: at least 1")
    results = [Result.of(data) for kind, _, data in read_archive(archive) if kind == "result"]
    out = Path(args.out) if args.out else rivals_path(args.archive, args.grid)
    command = "depthprune measure rivals " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["measure", "rivals"] \
        else f"depthprune measure rivals --grid {args.grid}"
    done = measure(grids[args.grid], results, load_table(), args.work, out, command, limit=args.limit)
    print(f"{len(done['rivals'])} rivals of {args.grid} in {out}")
    return 0
