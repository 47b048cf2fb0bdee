"""A grid's heals: each distinct set once, the controls planned from the sets alone, a journal that resumes
with only the jobs left, and healed results that only a healed reader sees."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from depthprune.data import healing_text
from depthprune.data.protocol import EvalConfig
from depthprune.healing.config import HealConfig
from depthprune.healing.grid_heals import HEALED_SUFFIX, HealJob, distinct_sets, heal_grid, plan_jobs
from depthprune.recipe import Session, identity, make_result
from depthprune.results.schema import to_json, validate
from depthprune.results.store import iter_dense, iter_results, write_result
from tests.fixtures import random_text, write_jsonl, write_model_dir

EVAL = EvalConfig(tasks=("hellaswag",), lambada=False, perplexity=("c4",), seq_len=32, c4_windows=2, batch_size=4,
                  limit=6)


def test_the_plan_heals_each_set_once_with_the_dense_control_and_a_seed_subset():
    sets = {"m": {(1,): [], (1, 2): [], (2, 3): [], (3,): []}}
    jobs = plan_jobs(sets, seed=0, second_seed=1, second_every=2)
    assert [j for j in jobs if j.seed == 0] == [HealJob("m", s, 0) for s in [(1,), (1, 2), (2, 3), (3,)]] + [
        HealJob("m", (), 0)]
    assert [j.removed for j in jobs if j.seed == 1] == [(1,), (2, 3), ()]
    assert not [j for j in plan_jobs(sets, second_seed=None) if j.seed != 0]


#: the tests that read ``grid_results`` on one xdist worker: its searches and evaluations then run once, not on both
_ONE_WORKER = pytest.mark.xdist_group("grid-heals")


@pytest.fixture(scope="module")
def grid_results(tmp_path_factory) -> tuple[Path, list]:
    root = Path(tmp_path_factory.mktemp("grid"))
    model = write_model_dir(root / "model", n_layers=4)
    session = Session.open(str(model), profile="tiny", dtype="float32")
    calib = session.calibrate("ppl", n_samples=4, seq_len=32)
    results = []
    for search, budget in (("oneshot", 1), ("greedy", 1), ("oneshot", 2)):
        outcome = calib.search(search, budget, seed=0, progress=False)
        ev = session.evaluate(outcome.removed, EVAL)
        r = make_result(session, calib, outcome, identity(session, calib, search, budget, 0, grid="g"), ev, EVAL,
                        cell=f"m-ppl-{search}-M{budget}")
        write_result(root / "results" / "g" / f"{r['cell']}.json", to_json(r))
        results.append(validate(to_json(r), "made"))
    return root, results


@_ONE_WORKER
def test_a_grid_heal_resumes_with_the_jobs_left_and_only_healed_readers_see_it(grid_results, monkeypatch):
    root, results = grid_results
    monkeypatch.chdir(root)  # the results name their model "model": the grid heal opens it by that name, as a
    # grid's registry ids are opened
    monkeypatch.setenv(healing_text.ENV, str(write_jsonl(root / "heal.jsonl", random_text(30, 50))))
    cfg = HealConfig(tokens=256, seq_len=32)
    out = root / "out"
    sets = distinct_sets(results)
    n_sets = len(next(iter(sets.values())))
    done = heal_grid(results, {}, "g", cfg, out, second_seed=None, progress=False)
    assert done["jobs"] == n_sets + 1 and done["run"] == n_sets + 1
    healed = list(iter_results([out], healed=True))
    assert len(healed) == len(results)  # every cell healed: each set once, shared by the searchers that found it
    assert not list(iter_results([out]))  # an unhealed reader sees none of them
    assert [d["heal"] for d in iter_dense([out], healed=True)] == [cfg.tag] and not list(iter_dense([out]))
    for h in healed:
        assert h.identity.heal == cfg.tag and h["healing"]["before_float32"]["metrics"]
    # a run killed after its first job: the journal keeps what finished, the rerun does only the rest
    journal = sorted((out / f"g{HEALED_SUFFIX}" / "heals").glob("*.json"))
    for path in journal[1:]:
        path.unlink()
    journal[1].write_text('{"job": ')  # a record a kill -9 cut short is done again, not trusted
    again = heal_grid(results, {}, "g", cfg, out, second_seed=None, progress=False)
    assert again["resumed"] == 1 and again["run"] == n_sets
    assert asdict(HealJob("m", (1,), 0))["removed"] == (1,)


@_ONE_WORKER
def test_a_second_seed_reuses_its_sets_evaluation_before_healing(grid_results, monkeypatch):
    """The unhealed set's float32 evaluation is evaluated once per set, whatever the number of seeds healing it."""
    from depthprune.healing import grid_heals

    root, results = grid_results
    monkeypatch.chdir(root)
    monkeypatch.setenv(healing_text.ENV, str(write_jsonl(root / "heal.jsonl", random_text(30, 50))))
    calls = []
    real = grid_heals.evaluate_unhealed
    monkeypatch.setattr(grid_heals, "evaluate_unhealed", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    out = root / "two-seeds"
    n_sets = len(next(iter(distinct_sets(results).values())))
    done = heal_grid(results, {}, "g", HealConfig(tokens=128, seq_len=32), out, second_seed=1, second_every=1,
                     progress=False)
    assert done["run"] == 2 * (n_sets + 1) and len(calls) == n_sets + 1
    records = [json.loads(p.read_text()) for p in sorted((out / f"g{HEALED_SUFFIX}" / "heals").glob("*.json"))]
    by_set: dict = {}
    for r in records:
        by_set.setdefault(tuple(r["job"]["removed"]), []).append(r["before_float32"])
    assert all(len(v) == 2 and v[0] == v[1] for v in by_set.values())
