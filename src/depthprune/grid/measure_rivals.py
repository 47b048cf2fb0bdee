"""``depthprune measure rivals``: the rival answers of a grid's cells decided inside a rounding band
(:mod:`depthprune.verify.rivals`), found with the model and evaluated, so that REPORT can re-judge the verdicts.

The rival set is evaluated here with the grid's evaluation (its cache shared with the grid runner's).
Its metrics are this machine's, another numeric class than the archived ones: the evaluation bands (rule E2)
say how far apart those can be, and the rivals file records the machine and each rival's provenance.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from depthprune.common import layout
from depthprune.common.jsonio import read_json, write_json_atomic
from depthprune.grid.cases import Grid
from depthprune.grid.runner import GridRunner, objective_params
from depthprune.results.provenance import environment
from depthprune.results.schema import Result
from depthprune.verify.firmness import (
    RIVALS_SCHEMA,
    decision_key,
    known_rival,
)
from depthprune.verify.rivals import follow, wanted


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
    p.add_argument("--archive", default=layout.ARCHIVE, help="the archive directory (default: archive)")
    p.add_argument("--cases", default=layout.CASES, help="the case files (default: cases)")
    p.add_argument("--work", default=layout.RESULTS,
                   help="a results directory whose evaluation cache and score store the runs share (default: results)")
    p.add_argument("--out", default=None, help="the rivals file (default: ARCHIVE/rivals-GRID.json); a partial one "
                                               "is resumed")
    p.add_argument("--limit", type=int, default=None, help="at most this many rivals this run (the rest next run)")


def run(args: argparse.Namespace) -> int:
    from depthprune.common.errors import InputError
    from depthprune.grid.cases import CaseFileError, load_grids
    from depthprune.results.archive import SUFFIX, read_archive
    from depthprune.verify.bands import load_table

    try:
        grids = {g.name: g for g in load_grids(args.cases)}
    except (CaseFileError, FileNotFoundError) as err:
        raise InputError(f"--cases {args.cases}: {err}") from None
    if args.grid not in grids:
        raise InputError(f"--grid {args.grid!r}: no such grid in {args.cases}; allowed: {', '.join(sorted(grids))}")
    archive = Path(args.archive) / f"{args.grid}{SUFFIX}"
    if not archive.is_file():
        raise InputError(f"--archive {args.archive}: no {archive.name} (archive the grid first: depthprune archive)")
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit {args.limit}: at least 1")
    results = [Result.of(data) for kind, _, data in read_archive(archive) if kind == "result"]
    out = Path(args.out) if args.out else layout.rivals_file(args.archive, args.grid)
    command = "depthprune measure rivals " + " ".join(sys.argv[3:]) if sys.argv[1:3] == ["measure", "rivals"] \
        else f"depthprune measure rivals --grid {args.grid}"
    done = measure(grids[args.grid], results, load_table(), args.work, out, command, limit=args.limit)
    print(f"{len(done['rivals'])} rivals of {args.grid} in {out}")
    return 0
