"""The calibration-size curve's parts without a model: disjoint shards of a pool, the objectives' shard
parameter, the enlarged calibration pool (frozen, hashed, free of evaluation text) and the rule that
picks a size, run on constructed searches whose sets settle, or never do."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from depthprune.builders import calibration_pool as pool
from depthprune.builders.python_docs import DATA, frozen_split, read_manifest
from depthprune.cli import main as cli
from depthprune.common.params import parse_shard
from depthprune.data.profiles import get_profile
from depthprune.data.sources import take_shard
from depthprune.experiments import calibration_curve as cc
from depthprune.objectives import make_objective


def test_shards_are_disjoint_and_cover_the_pool():
    items = list(range(100))
    shards = [take_shard(items, f"{i}/3") for i in range(3)]
    assert sorted(sum(shards, [])) == items
    assert all(not set(a) & set(b) for a in shards for b in shards if a is not b)
    assert take_shard(items, "") == items
    for bad in ("3/3", "1", "a/b", "-1/2", "1/0"):
        with pytest.raises(ValueError, match="shard"):
            parse_shard(bad)


@pytest.mark.parametrize("name", ["ppl", "margin"])
def test_the_shard_parameter_is_checked_and_absent_from_params_when_unset(name):
    real = get_profile("real")
    assert "shard" not in make_objective(name, real).params()  # older results' fingerprints are unchanged
    assert make_objective(name, real, shard="1/3").params()["shard"] == "1/3"
    with pytest.raises(ValueError, match=f"{name}: shard must be"):
        make_objective(name, real, shard="3/3")


def test_the_pool_is_frozen_hashed_and_holds_no_evaluation_text():
    entry = read_manifest()["calibration_pool"]
    path = DATA / entry["file"]
    assert read_manifest()["sha256"]["data/" + entry["file"]] == hashlib.sha256(path.read_bytes()).hexdigest()
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == entry["documents"] and "python3.11-doc" in entry["source"] and "PSF" in entry["license"]
    calibration = frozen_split("calibration")
    assert [r["text"] for r in rows[: len(calibration)]] == [d["text"] for d in calibration]
    held_out = set().union(*(pool._sentences(d["text"]) for s in ("validation", "test") for d in frozen_split(s)))
    # the added pages (the calibration split's own documents were split from the evaluation ones by group)
    assert not any(pool._sentences(r["text"]) & held_out for r in rows[len(calibration):])
    # each shard holds at least twice a 64 x 128-token sample (~1.3 tokens a word)
    words = [sum(len(r["text"].split()) for r in take_shard(rows, f"{i}/3")) for i in range(3)]
    assert min(words) * 1.3 > 2 * 64 * 128, words


def test_rst_to_text_keeps_prose_and_code_and_drops_markup():
    text = pool.rst_to_text(
        ".. _tut-if:\n\nThe :keyword:`!if` Statement\n=======================\n\n.. index::\n   statement: if\n\n"
        "Use :func:`sorted <sorted>` or ``list.sort``, see `the docs <https://x>`_. For example::\n\n"
        "   >>> sorted([2, 1])\n   [1, 2]\n")
    assert text == ("The if Statement\n\nUse sorted or list.sort, see the docs. For example:\n\n"
                    "   >>> sorted([2, 1])\n   [1, 2]\n")


def _write_curve(out: Path, sets_by_size: dict[int, list[list[int]]], objective: str = "ppl") -> None:
    """A curve whose three seeds found ``sets_by_size[n]`` (seeds 0, 1, 2) with both searchers."""
    cfg = {"model": "m", "budget": 3, "searchers": ["oneshot", "greedy"], "seeds": [0, 1, 2],
           "objectives": [objective], "sizes": {objective: sorted(sets_by_size)}}
    (out / "runs").mkdir(parents=True)
    (out / "held_out").mkdir()
    (out / "config.json").write_text(json.dumps(cfg))
    for n, sets in sets_by_size.items():
        for seed, removed in enumerate(sets):
            for searcher in cfg["searchers"]:
                (out / "runs" / cc.run_name(objective, seed, n, searcher)).write_text(json.dumps(
                    {"removed": removed, "calibration_loss": 1.0 + len(set(removed) - {1, 2, 3}),
                     "dense_calibration_loss": 1.0, "cost": {"seconds": float(n)}}))
    for seed in range(3):
        found = {",".join(map(str, s[seed])) for s in sets_by_size.values()}
        (out / "held_out" / f"{objective}-s{seed}.json").write_text(json.dumps(
            {"dense_loss": 0.0, "losses": {k: float(len(set(k.split(",")) - {"1", "2", "3"})) for k in found}}))


def test_the_rule_picks_the_size_where_the_sets_stop_moving(tmp_path):
    settled = [[1, 2, 3]] * 3
    _write_curve(tmp_path, {8: [[4, 5, 6], [7, 8, 9], [1, 5, 9]], 16: settled, 32: settled, 64: settled})
    summary = cc.summarize(tmp_path)
    assert summary["chosen"]["ppl"] == {"size": 16, "settled_before_largest": True}
    row = {(r["searcher"], r["size"]): r for r in summary["rows"]}
    assert row["greedy", 8]["cross_seed_jaccard"] == pytest.approx((0 + 0.2 + 0.2) / 3)
    assert row["greedy", 8]["held_out_loss_delta"] == pytest.approx(8 / 3) and row["greedy", 16]["loss_delta"] == 0
    assert summary["rule"]["text"].startswith("for each objective, the smallest n of the curve")
    assert "| ppl" in cc.table(summary)


def test_a_curve_that_never_settles_says_so(tmp_path):
    _write_curve(tmp_path, {8: [[1, 2, 3], [4, 5, 6], [7, 8, 9]], 16: [[4, 5, 6], [7, 8, 9], [1, 2, 3]],
                            32: [[7, 8, 9], [1, 2, 3], [4, 5, 6]]})
    assert cc.summarize(tmp_path)["chosen"]["ppl"] == {"size": 32, "settled_before_largest": False}


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "ppl=8,x"], "integers"),
    (["--objectives", "kl"], "--objectives"),
    (["--seeds", "0,0"], "distinct seeds"),
])
def test_bad_curve_input_exits_2_before_anything_is_loaded(tmp_path, capsys, argv, message):
    assert cli(["measure", "calibration-curve", "run", "--out", str(tmp_path / "c"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_the_docstring_rule_names_the_constants():
    rule = cc.__doc__.split("THE RULE")[1]
    assert re.search(r">= 0\.75", rule) and cc.SETTLED_JACCARD == 0.75
    assert "minus 0.1" in rule and cc.CROSS_SEED_SLACK == 0.1
