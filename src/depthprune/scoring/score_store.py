"""A condition's calibration losses on disk, shared by every cell, worker and run that scores it.

A set's calibration loss is a pure function of its *condition* and the set: the model's weights,
the objective with its calibration data, the batch size, device, dtype, the matmul kernels and
torch's thread count (both change float rounding), the result-affecting code and the library
versions. :func:`store_key` hashes all of them, like the evaluation cache's key
(:func:`depthprune.evaluation.evaluate.cache_key`), so a loss computed by older code, other kernels or another
dtype never matches. Within one condition a loss is the same bits wherever it was computed (a
prefix-cached pass and a fresh one are the same forward pass: ``Scorer._verify``), so a cell that
takes a loss from the store returns the same removed set and loss as one that computes it.

The store also keeps a condition's gate-gradient energy (cbo's quadratic model, the same for every
budget) and the wall seconds each entry took where it was computed, so that a result can still
report its cost as if its searcher ran alone (:mod:`depthprune.recipe`).

Why SQLite (the standard library's): every write is one transaction, so concurrent xdist workers
never see or make a partial entry, and a process killed with -9 leaves every committed entry and
no torn one (the rollback journal undoes an unfinished transaction on the next open). Losses are
stored as ``float.hex`` text, exact and NaN-safe (SQLite turns a NaN REAL into NULL).

``DEPTHPRUNE_SCORE_STORE=off`` turns the store off (:func:`store_enabled`), so that its gain can
be measured side by side (``bench/test_bench_score_store.py``).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import canonical
from depthprune.common.machine import switch

#: file name of a results directory's store (next to its ``eval-cache/``)
STORE_NAME = "score-store.sqlite"
ENV = "DEPTHPRUNE_SCORE_STORE"
_SCHEMA = 1
_TIMEOUT_S = 120.0  # how long a writer waits for another worker's transaction


def store_enabled() -> bool:
    """False when ``DEPTHPRUNE_SCORE_STORE`` is ``off`` (also ``0``, ``false``, ``no``)."""
    return switch(ENV)


def store_key(description: Mapping[str, Any]) -> str:
    """sha256 (24 hex) of everything a condition's losses depend on (module docstring)."""
    blob = canonical(description, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def set_text(removed: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(removed))


def _parse_set(text: str) -> frozenset[int]:
    return frozenset(int(i) for i in text.split(",")) if text else frozenset()


class ScoreStore:
    """One condition's entries in one SQLite file (module docstring).

    ``losses()`` reads every stored loss of the condition; ``put`` adds one (first write wins: a
    second worker's identical loss is not written again); ``get_extra``/``put_extra`` do the same
    for a named JSON value such as the gate-gradient energy.
    """

    def __init__(self, path: str | Path, condition: str, description: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.condition = condition
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.executescript(
                "CREATE TABLE IF NOT EXISTS conditions (condition TEXT PRIMARY KEY, schema INTEGER, description TEXT);"
                "CREATE TABLE IF NOT EXISTS losses (condition TEXT, removed TEXT, loss TEXT NOT NULL,"
                " seconds REAL NOT NULL, PRIMARY KEY (condition, removed)) WITHOUT ROWID;"
                "CREATE TABLE IF NOT EXISTS extras (condition TEXT, name TEXT, value TEXT NOT NULL,"
                " seconds REAL NOT NULL, PRIMARY KEY (condition, name)) WITHOUT ROWID;")
            conn.execute("INSERT OR IGNORE INTO conditions VALUES (?, ?, ?)",
                         (condition, _SCHEMA, canonical(dict(description or {}), default=str)))

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection whose ``with`` block is one transaction (committed, or rolled back on error)."""
        try:
            conn = sqlite3.connect(self.path, timeout=_TIMEOUT_S)
        except sqlite3.Error as exc:
            raise RuntimeError(f"{self.path}: cannot open the score store: {exc}") from exc
        with closing(conn):
            try:
                with conn:
                    yield conn
            except sqlite3.DatabaseError as exc:
                raise RuntimeError(f"{self.path}: the score store is unreadable ({exc}); delete it to start afresh "
                                   f"(or set {ENV}=off)") from exc

    def losses(self) -> dict[frozenset[int], tuple[float, float]]:
        """Every stored set of the condition: (loss, seconds it took where it was computed)."""
        with self._connect() as conn:
            rows = conn.execute("SELECT removed, loss, seconds FROM losses WHERE condition = ?",
                                (self.condition,)).fetchall()
        return {_parse_set(r): (float.fromhex(loss), float(sec)) for r, loss, sec in rows}

    def put(self, removed: frozenset[int], loss: float, seconds: float) -> None:
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO losses VALUES (?, ?, ?, ?)",
                         (self.condition, set_text(removed), float(loss).hex(), float(seconds)))

    def get_extra(self, name: str) -> tuple[Any, float] | None:
        with self._connect() as conn:
            row = conn.execute("SELECT value, seconds FROM extras WHERE condition = ? AND name = ?",
                               (self.condition, name)).fetchone()
        return None if row is None else (json.loads(row[0]), float(row[1]))

    def put_extra(self, name: str, value: Any, seconds: float) -> None:
        with self._connect() as conn:
            conn.execute("INSERT OR IGNORE INTO extras VALUES (?, ?, ?, ?)",
                         (self.condition, name, json.dumps(value), float(seconds)))


def integrity(path: str | Path) -> str:
    """SQLite's own check of a store file ("ok" when whole)."""
    with closing(sqlite3.connect(path, timeout=_TIMEOUT_S)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


__all__ = ["ENV", "STORE_NAME", "ScoreStore", "store_key", "integrity", "set_text", "store_enabled"]
