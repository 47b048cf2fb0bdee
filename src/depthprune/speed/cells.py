"""Every evaluated cell of a grid gets a speedup: each distinct removed set of its results, measured once.

A grid's cells share removed sets (searchers agree often), and a set's speed does not depend on which
searcher found it, so each ``(model, removed set)`` is rebuilt and timed once, against its dense
model loaded once, and the record lists the cells it stands for. The measurement depends on the
machine, so it is no reference: it is an archive file with the machine recorded
(``archive/speed-<grid>.json``). Beside each measured speedup stand the blocks-only prediction and
the shipped cost table's, which are the same on every machine.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable
from typing import Any

from torch import nn

from depthprune.speed import costs
from depthprune.speed.compare import rebuild, time_pair
from depthprune.speed.timing import Workload

SCHEMA = "depthprune-speed-grid/1"  # a string, so results readers skip the file (depthprune.result.is_result)


def distinct_sets(results: Iterable[dict[str, Any]], grid: str) -> dict[str, dict[tuple[int, ...], list[str]]]:
    """``model -> removed set -> the cells that removed it``, over the grid's results (dense cells, M = 0, left out)."""
    out: dict[str, dict[tuple[int, ...], list[str]]] = {}
    for r in results:
        if r.get("grid") != grid or not r.get("removed"):
            continue
        removed = tuple(sorted(int(i) for i in r["removed"]))
        out.setdefault(str(r["model"]), {}).setdefault(removed, []).append(str(r["cell"]))
    return {m: dict(sorted(sets.items(), key=lambda kv: (len(kv[0]), kv[0]))) for m, sets in sorted(out.items())}


def grid_workloads(contexts: tuple[int, int], new_tokens: int) -> list[Workload]:
    """What each set is timed on: a batch-1 prefill at the long context and batch-1 decode after the short prompt."""
    return [Workload("prefill", 1, contexts[1]), Workload("decode", 1, contexts[0], new_tokens)]


def measure_sets(sets: dict[str, dict[tuple[int, ...], list[str]]], load: Callable[[str], nn.Module],
                 contexts: Callable[[str], tuple[int, int]], new_tokens: int, rounds: int, warmup: int, device: str,
                 progress: bool = True) -> list[dict[str, Any]]:
    """One row per distinct set: its cells, the measured speedup per workload and both predictions."""
    from tqdm.auto import tqdm

    rows: list[dict[str, Any]] = []
    total = sum(len(s) for s in sets.values())
    with tqdm(total=total, desc="removed sets", unit="set", disable=not progress, leave=False) as bar:
        for model_id, by_set in sets.items():
            dense = load(model_id)
            table = costs.load_table(model_id)
            n = len(costs.block_types(dense.config))
            works = grid_workloads(contexts(model_id), new_tokens)
            for removed, cells in by_set.items():
                pruned = rebuild(dense, removed)
                timed = [time_pair(dense, pruned, w, rounds, warmup, device) for w in works]
                del pruned
                rows.append({
                    "model": model_id, "removed": list(removed), "m": len(removed), "n_layers": n, "cells": cells,
                    "measured": {t["workload"]: {"speedup": t["speedup"], "seconds": t["seconds"]} for t in timed},
                    "predicted": {"blocks_only": costs.blocks_only(n, len(removed)),
                                  "cost_table": {w.name: costs.predict(table, w.phase, removed) for w in works}},
                })
                bar.update(1)
            del dense
    return rows


def grid_record(grid: str, rows: list[dict[str, Any]], rounds: int, warmup: int, machine: dict[str, Any],
                command: str) -> dict[str, Any]:
    """The archive file's content: the rows, how they were measured, and on what."""
    return {"schema": SCHEMA, "kind": "depthprune-speed-grid", "grid": grid, "sets": rows, "rounds": rounds,
            "warmup": warmup, "machine": machine, "command": command,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "note": "measured on the machine recorded: not a reference; the predictions are machine-independent"}
