"""The score store: exact, keyed by condition, safe under kill -9, and invisible in results
(same removed sets, losses, traces and counted cost with it, without it, warm or cold)."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from depthprune.scoring.score_store import ENV, ScoreStore, integrity, store_enabled, store_key

COUNTS = ("evaluations", "layer_forwards", "layer_backwards", "prior_evaluations", "search_evaluations")


def test_losses_round_trip_exactly_nan_and_infinities_included(tmp_path):
    store = ScoreStore(tmp_path / "s.sqlite", "c1")
    values = {frozenset(): 1 / 3, frozenset([0]): math.inf, frozenset([1, 5]): -0.0, frozenset([2, 3, 9]): math.nan,
              frozenset([4]): 5e-324}
    for i, (s, v) in enumerate(values.items()):
        store.put(s, v, seconds=float(i))
    back = ScoreStore(tmp_path / "s.sqlite", "c1").losses()
    assert set(back) == set(values)
    for s, v in values.items():
        assert back[s][0].hex() == float(v).hex() or (math.isnan(v) and math.isnan(back[s][0]))
    assert back[frozenset([1, 5])][1] == 2.0


def test_first_write_wins_and_conditions_stay_apart(tmp_path):
    a, b = ScoreStore(tmp_path / "s.sqlite", "a"), ScoreStore(tmp_path / "s.sqlite", "b")
    a.put(frozenset([1]), 1.0, 0.5)
    a.put(frozenset([1]), 2.0, 0.7)
    assert a.losses() == {frozenset([1]): (1.0, 0.5)} and b.losses() == {}
    a.put_extra("energy", [[0.5], [[0.0]]], 3.0)
    assert a.get_extra("energy") == ([[0.5], [[0.0]]], 3.0) and b.get_extra("energy") is None
    assert store_key({"x": 1, "y": 2}) == store_key({"y": 2, "x": 1}) != store_key({"x": 1, "y": 3})


def test_the_switch_takes_on_and_off_and_refuses_anything_else(monkeypatch):
    monkeypatch.setenv(ENV, "off")
    assert not store_enabled()
    monkeypatch.setenv(ENV, "on")
    assert store_enabled()
    monkeypatch.setenv(ENV, "sometimes")
    with pytest.raises(ValueError, match="allowed values are 'on' and 'off'"):
        store_enabled()


def test_a_file_that_is_not_a_store_is_named(tmp_path):
    bad = tmp_path / "s.sqlite"
    bad.write_bytes(b"not a database, " * 100)
    with pytest.raises(RuntimeError, match=r"s\.sqlite.*unreadable"):
        ScoreStore(bad, "c")


_WRITER = textwrap.dedent("""
    import sys, itertools, time
    from depthprune.scoring.score_store import ScoreStore
    store, paced = ScoreStore(sys.argv[1], "c"), len(sys.argv) > 2
    for n, s in enumerate(itertools.combinations(range(24), 3)):
        store.put(frozenset(s), sum(s) / 7.0, float(n))
        if paced and n == 199:
            print("200 written", flush=True)
        if paced and n >= 199:
            time.sleep(0.02)  # the rest takes >= 36 s, so a loaded parent still kills it mid-stream
""")


def test_kill_9_leaves_whole_entries_only_and_a_rerun_completes(tmp_path):
    """A writer killed with -9 mid-stream: SQLite's own check passes, every entry read back is
    complete and right, and a second writer over the same file finishes the job. The writer says
    when 200 entries are in (no polling race: on a loaded CI machine a polled writer once finished
    before the kill)."""
    path = tmp_path / "s.sqlite"
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "paced"], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "200 written"
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == -signal.SIGKILL
    assert integrity(path) == "ok"
    stored = ScoreStore(path, "c").losses()
    assert 200 <= len(stored) < 2024  # killed before the end
    assert all(loss == sum(s) / 7.0 for s, (loss, _) in stored.items())
    subprocess.run([sys.executable, "-c", _WRITER, str(path)], check=True)
    assert integrity(path) == "ok" and len(ScoreStore(path, "c").losses()) == 2024


# -- the store under the recipe: results bit for bit ---------------------------------------------------


@pytest.fixture(scope="module")
def session():
    from depthprune.recipe import Session

    return Session.open("tiny-llama3")


def _calibration(session, store_path: Path | None, seq_len: int = 16):
    """A fresh calibration (as a new process would build it) over ``store_path``."""
    from depthprune.objectives import make_objective
    from depthprune.recipe import Calibration

    session.store_path = store_path
    return Calibration.build(session, make_objective("ppl", session.profile, n_samples=2, seq_len=seq_len))


SEARCHES = (("greedy", 2, {}), ("beam", 2, {"beam_width": 2}), ("cbo", 2, {}))


def test_a_warm_store_changes_what_runs_not_the_results_or_their_count(session, tmp_path):
    """Cold (no store, nothing shared), the run that fills a store, and a later calibration reading
    it: the same removed sets, losses, traces and counted costs. The later one runs no set, no
    prior and no energy of its own, and says so in its seconds. (cbo's energy given or computed:
    test_a_given_energy_is_the_computed_one, at lower cost.)"""
    cold = _calibration(session, None)
    alone = {n: cold.search(n, b, params=p, share_memo=False) for n, b, p in SEARCHES if n != "cbo"}
    filling = _calibration(session, tmp_path / "store.sqlite")
    filled = {n: filling.search(n, b, params=p) for n, b, p in SEARCHES}
    # within one process the condition's memo already shares: beam takes greedy's sets
    assert filled["beam"].cost["shared_sets"] > 0 and filled["greedy"].cost["shared_sets"] == 0
    assert filled["beam"].cost["layer_forwards_here"] < alone["beam"].cost["layer_forwards_here"]
    warm = _calibration(session, tmp_path / "store.sqlite")
    assert cold.prior == filling.prior == warm.prior
    assert warm.prior_seconds_here < filling.prior_seconds_here and warm.prior_seconds == filling.prior_seconds
    for name, budget, params in SEARCHES:
        c = warm.search(name, budget, params=params)
        b = filled[name]
        for other, a in ((b, alone.get(name, b)), (c, b)):
            assert other.removed == a.removed and other.result.loss == a.result.loss
            assert other.result.trace == a.result.trace
            assert {k: other.cost[k] for k in COUNTS} == {k: a.cost[k] for k in COUNTS}
        assert c.cost["layer_forwards_here"] == 0, name  # every set, the energy too, came stored
        assert c.cost["shared_seconds"] > 0
    assert filled["cbo"].cost["layer_backwards"] > 0
    assert warm.energy is not None and filling.energy is not None and warm.energy[0] == filling.energy[0]


def test_a_given_energy_is_the_computed_one():
    """cbo on a fork given another search's energy: the same set, loss, trace and request log
    (hence the same replayed cost) as on a fork that computes it, with no gradient pass run."""
    from depthprune.search import get_searcher
    from tests.scoring.test_request_cost import N_LAYERS, _scorer

    base = _scorer(verify=False)
    prior = [base(frozenset([i])) for i in range(N_LAYERS)]
    known = {frozenset([i]): loss for i, loss in enumerate(prior)}
    first = base.fork(known=known)
    get_searcher("cbo").search(n_layers=N_LAYERS, budget=2, score=first, seed=0)
    assert first.computed_energy is not None and first.stats.layer_backwards > 0
    given, alone = base.fork(known=known, energy=first.computed_energy), base.fork(known=known)
    a = get_searcher("cbo").search(n_layers=N_LAYERS, budget=3, score=alone, seed=0)
    b = get_searcher("cbo").search(n_layers=N_LAYERS, budget=3, score=given, seed=0)
    assert (b.removed, b.loss, b.trace) == (a.removed, a.loss, a.trace) and given.requests == alone.requests
    assert given.stats.layer_backwards == 0 < alone.stats.layer_backwards and given.computed_energy is None


def test_another_condition_never_reads_the_store(session, tmp_path):
    first = _calibration(session, tmp_path / "store.sqlite")
    other = _calibration(session, tmp_path / "store.sqlite", seq_len=12)  # other calibration data: another condition
    assert first.store is not None and other.store is not None and other.store.condition != first.store.condition
    assert other.prior_seconds_here > 0 and other.prior != first.prior
    assert len(other.store.losses()) == len(first.store.losses()) == 16


# -- a grid cell killed with -9 and rerun ----------------------------------------------------------------

_CELL = textwrap.dedent("""
    import sys, torch
    torch.set_num_threads(1)
    from depthprune.grid.cases import load_grid
    from depthprune.grid.runner import GridRunner
    grid = load_grid(sys.argv[1])
    GridRunner(sys.argv[2]).result(grid, grid.cells()[0])
""")
KILL_GRID = Path(__file__).parents[1] / "data" / "kill-grid.toml"


def _stored_pairs(path: Path) -> int:
    try:
        with sqlite3.connect(path, timeout=30) as conn:
            return conn.execute("SELECT count(*) FROM losses WHERE removed LIKE '%,%'").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_a_cell_killed_with_9_loses_only_itself_and_its_rerun_is_the_same_cell(tmp_path):
    """kill -9 in the middle of a GA search: no result is written (the cell was in flight), the store
    is whole; the rerun takes the killed run's sets from it and returns what a run with no store does."""
    from depthprune.grid.cases import load_grid
    from depthprune.grid.runner import objective_params
    from depthprune.recipe import Session
    from depthprune.results.store import iter_results

    results = tmp_path / "results"
    store = results / "score-store.sqlite"
    run = subprocess.Popen([sys.executable, "-c", _CELL, str(KILL_GRID), str(results)])
    try:
        deadline = time.monotonic() + 300
        while _stored_pairs(store) < 20 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(run.pid, signal.SIGKILL)
    finally:
        run.wait()
    assert run.returncode == -signal.SIGKILL, "the cell finished before it was killed: give GA more evaluations"
    assert not list(iter_results([results])) and integrity(store) == "ok"
    subprocess.run([sys.executable, "-c", _CELL, str(KILL_GRID), str(results)], check=True)
    (result,) = list(iter_results([results]))
    assert result["cost"]["shared_sets"] >= 20  # the killed run's sets, from the store
    grid = load_grid(KILL_GRID)
    cell = grid.cells()[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        session = Session.open(cell.model, dtype=grid.dtype, batch_size=grid.batch_size)
        alone = session.calibrate(cell.objective, **objective_params(grid, cell)).search(
            cell.search, cell.budget, seed=cell.seed, params=grid.search_params(cell), share_memo=False)
    finally:
        torch.set_num_threads(threads)
    assert result["removed"] == list(alone.removed) and result["calibration_loss"] == alone.result.loss
    assert result["trace"] == [[sorted(s), loss] for s, loss in alone.result.trace]
    assert {k: result["cost"][k] for k in COUNTS} == {k: alone.cost[k] for k in COUNTS}
