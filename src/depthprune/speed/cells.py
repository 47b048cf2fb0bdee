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
from pathlib import Path
from typing import Any

from torch import nn

from depthprune.common.jsonio import JSONFileError, append_jsonl, parse_json, write_jsonl
from depthprune.results.schema import Result
from depthprune.speed import costs
from depthprune.speed.compare import rebuild, time_pair
from depthprune.speed.timing import Workload

SCHEMA = "depthprune-speed-grid/1"  # a string, so results readers skip the file (depthprune.results.schema.is_result)


def distinct_sets(results: Iterable[Result], grid: str) -> dict[str, dict[tuple[int, ...], list[str]]]:
    """``model -> removed set -> the cells that removed it``, over the grid's results (dense cells, M = 0, left out)."""
    out: dict[str, dict[tuple[int, ...], list[str]]] = {}
    for r in results:
        if r.identity.grid != grid or not r.get("removed"):
            continue
        removed = tuple(sorted(int(i) for i in r["removed"]))
        out.setdefault(str(r.identity.model), {}).setdefault(removed, []).append(str(r["cell"]))
    return {m: dict(sorted(sets.items(), key=lambda kv: (len(kv[0]), kv[0]))) for m, sets in sorted(out.items())}


def grid_workloads(contexts: tuple[int, int], new_tokens: int) -> list[Workload]:
    """What each set is timed on: a batch-1 prefill at the long context and batch-1 decode after the short prompt."""
    return [Workload("prefill", 1, contexts[1]), Workload("decode", 1, contexts[0], new_tokens)]


def measure_sets(sets: dict[str, dict[tuple[int, ...], list[str]]], load: Callable[[str], nn.Module],
                 contexts: Callable[[str], tuple[int, int]], new_tokens: int, rounds: int, warmup: int, device: str,
                 progress: bool = True, journal: Journal | None = None) -> list[dict[str, Any]]:
    """One row per distinct set: its cells, the measured speedup per workload and both predictions.

    With a ``journal``, sets it already holds are taken from it (a dense model none of whose sets is
    left is not even loaded) and each new row is appended to it as soon as it is measured."""
    from tqdm.auto import tqdm

    done = journal.done if journal is not None else {}
    rows: list[dict[str, Any]] = []
    total = sum(len(s) for s in sets.values())
    with tqdm(total=total, desc="removed sets", unit="set", disable=not progress, leave=False) as bar:
        for model_id, by_set in sets.items():
            dense = load(model_id) if any((model_id, r) not in done for r in by_set) else None
            table = costs.load_table(model_id)
            for removed, cells in by_set.items():
                if (model_id, removed) in done:
                    rows.append({**done[(model_id, removed)], "cells": cells})
                    bar.update(1)
                    continue
                assert dense is not None
                n = len(costs.block_types(dense.config))
                works = grid_workloads(contexts(model_id), new_tokens)
                pruned = rebuild(dense, removed)
                timed = [time_pair(dense, pruned, w, rounds, warmup, device) for w in works]
                del pruned
                row = {
                    "model": model_id, "removed": list(removed), "m": len(removed), "n_layers": n, "cells": cells,
                    "measured": {t["workload"]: {"speedup": t["speedup"], "seconds": t["seconds"]} for t in timed},
                    "predicted": {"blocks_only": costs.blocks_only(n, len(removed)),
                                  "cost_table": {w.name: costs.predict(table, w.phase, removed) for w in works}},
                }
                if journal is not None:
                    journal.append(row)
                rows.append(row)
                bar.update(1)
            del dense
    return rows


class Journal:
    """A grid speed run's rows as they are measured (JSON lines beside the archive, ``<json>.partial``),
    so that a stopped run resumes where it stopped. Its first line holds the run's settings; a
    journal of other settings (another machine, other rounds or contexts) is refused, not mixed in.
    A half-written last line (a kill mid-write) is dropped."""

    def __init__(self, path: str | Path, settings: dict[str, Any]) -> None:
        """Open the journal at ``path``, started with ``settings`` if there is none, its rows read once
        into :attr:`done`; a journal of other settings raises ValueError."""
        self.path, self.settings = Path(path), settings
        self.done: dict[tuple[str, tuple[int, ...]], dict[str, Any]] = {}
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_jsonl(self.path, [{"settings": self.settings}], sort_keys=True)
            return
        lines = self.path.read_text().splitlines()
        head = parse_json(lines[0], self.path, 1) if lines else {}
        if head.get("settings") != self.settings:
            raise ValueError(f"{self.path}: a stopped run of other settings ({head.get('settings')}); "
                             f"delete it to start over, or rerun with its settings")
        for n, line in enumerate(lines[1:], 2):
            try:
                row = parse_json(line, self.path, n)
            except JSONFileError:  # the line a kill cut short
                continue
            self.done[(str(row["model"]), tuple(row["removed"]))] = row

    @classmethod
    def beside(cls, archive: str | Path, settings: dict[str, Any]) -> Journal:
        return cls(Path(str(archive) + ".partial"), settings)

    def append(self, row: dict[str, Any]) -> None:
        append_jsonl(self.path, row, sort_keys=True, sync=True)

    def close(self) -> None:
        """The run is whole and its archive written: the journal goes."""
        self.path.unlink(missing_ok=True)


def grid_record(grid: str, rows: list[dict[str, Any]], rounds: int, warmup: int, machine: dict[str, Any],
                command: str) -> dict[str, Any]:
    """The archive file's content: the rows, how they were measured, and on what."""
    return {"schema": SCHEMA, "kind": "depthprune-speed-grid", "grid": grid, "sets": rows, "rounds": rounds,
            "warmup": warmup, "machine": machine, "command": command,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "note": "measured on the machine recorded: not a reference; the predictions are machine-independent"}
