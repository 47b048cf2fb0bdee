"""The real profile's WordNet multiple-choice tasks (depthprune.builders.wordnet.tasks): frozen files, sizes,
clusters, splits, options, positions, and the model-free baselines at chance. No model, no WordNet:
everything is read from the frozen files (a rebuild check runs only where Debian's wordnet-base is
installed; the full byte-identical rebuild only with DEPTHPRUNE_REBUILD_MC=1, ~10 min)."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter

import pytest

from depthprune.builders import model_free as bl
from depthprune.builders.wordnet import tasks as mc_tasks

OUT = mc_tasks.OUT
MANIFEST = json.loads((OUT / "manifest.json").read_text(encoding="utf-8"))
FROZEN = json.loads((OUT / "baselines.json").read_text(encoding="utf-8"))
TASKS = {t: bl.frozen_task(OUT, t) for t in mc_tasks.TASKS}
#: the readers the frozen files alone can recompute (all but the n-gram model, which needs WordNet)
NGRAM = {"ngram", "ngram_norm"}


def test_every_shipped_file_matches_the_manifest():
    shipped = sorted(p.relative_to(OUT).as_posix() for p in mc_tasks.shipped_files(OUT))
    assert shipped == sorted(MANIFEST["sha256"])
    for rel, digest in MANIFEST["sha256"].items():
        assert hashlib.sha256((OUT / rel).read_bytes()).hexdigest() == digest, rel
    source = MANIFEST["source"]
    assert source["debian_package"] == "wordnet-base" and source["version"]
    assert len(source["files"]) == len(mc_tasks.wnr.FILES) + 1 and all(len(d) == 64 for d in source["files"].values())
    license_text = (OUT / "LICENSE-WordNet.txt").read_text(encoding="utf-8")
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in license_text
    assert sum(p.stat().st_size for p in mc_tasks.shipped_files(OUT)) < 5 * 2**20


@pytest.mark.parametrize("task", mc_tasks.TASKS)
def test_sizes_clusters_and_disjoint_splits(task):
    train, test, _counts = TASKS[task]
    assert len(test) == mc_tasks.SIZES["test"] >= 1000 and len(train) == mc_tasks.SIZES["train"] >= 400
    for items in (train, test):
        assert all(isinstance(it["cluster"], str) and it["cluster"] for it in items)
        assert max(Counter(it["cluster"] for it in items).values()) <= mc_tasks.CAP[task]
        assert [it["id"] for it in items] == list(range(len(items)))
    assert not {it["cluster"] for it in train} & {it["cluster"] for it in test}
    # no item of one split is in the other (a short generic cloze prefix, "he is a man of", may open
    # example sentences of both, with other answers)
    gold = [{(it["ctx"], it["options"][it["label"]]) for it in items} for items in (train, test)]
    assert not gold[0] & gold[1]
    assert len({it["ctx"] for it in train} & {it["ctx"] for it in test}) <= 5


@pytest.mark.parametrize("task", mc_tasks.TASKS)
def test_options_and_gold_positions(task):
    for items in TASKS[task][:2]:
        for it in items:
            options = it["options"]
            assert len(options) == mc_tasks.K and 0 <= it["label"] < mc_tasks.K
            assert len({o.lower() for o in options}) == mc_tasks.K, it
            assert all(mc_tasks.ONE_WORD.fullmatch(o) for o in options)
            assert "\n" not in it["ctx"] and it["ctx"] == it["ctx"].strip()
            # no option shares a root with a word of the context
            assert not any(bl.related(o, w) for o in options for w in bl.words(it["ctx"])), it
        positions = Counter(it["label"] for it in items)
        assert max(positions.values()) - min(positions.values()) <= 1 and len(positions) == mc_tasks.K


@pytest.mark.parametrize("task", mc_tasks.TASKS)
def test_cheap_baselines_recompute_and_stay_at_chance(task):
    train, test, counts = TASKS[task]
    frozen = FROZEN["tasks"][f"real_{task}"]
    recomputed = bl.report(test, train, counts, seed=MANIFEST["parameters"]["seeds"]["bootstrap"])
    assert set(frozen) == set(recomputed) | NGRAM
    for name, row in recomputed.items():
        assert row == pytest.approx(frozen[name], abs=1e-6), name
    for name, row in frozen.items():
        assert row["chance"] == 1 / mc_tasks.K
        assert abs(row["acc"] - row["chance"]) <= 0.10, (task, name, row)
        assert row["lo"] <= row["acc"] <= row["hi"]


def test_margin_records_are_the_train_splits_in_cloze_form():
    from depthprune.data.sources import parse_commonsense_record

    records = json.loads((OUT / "commonsense" / "mc_train.json").read_text(encoding="utf-8"))
    expected = [(f"real_{t}", it) for t in mc_tasks.TASKS for it in TASKS[t][0]]
    assert len(records) == len(expected) == MANIFEST["commonsense/mc_train.json"]["records"]
    for record, (task, item) in zip(records, expected):
        assert record["task"] == task and record["cluster"] == item["cluster"]
        choice = parse_commonsense_record(record, answer="cloze")
        assert choice.prompt == item["ctx"]
        assert list(choice.choices) == [" " + o for o in item["options"]]
        assert choice.gold == item["label"]


def test_lm_eval_loads_the_tasks():
    pytest.importorskip("lm_eval")
    from depthprune.cards.wordnet_accuracy import profile

    prof = profile()
    tm = prof.task_manager()
    names = [prof.lm_eval_task(t) for t in mc_tasks.TASKS]
    assert all(name in tm.all_tasks for name in names)
    from lm_eval.tasks import get_task_dict

    tasks = get_task_dict(names, tm)
    for task, name in zip(mc_tasks.TASKS, names):
        docs = list(tasks[name].test_docs())
        assert len(docs) == mc_tasks.SIZES["test"]
        doc = docs[0]
        assert tasks[name].doc_to_text(doc) == TASKS[task][1][0]["ctx"]
        assert tasks[name].doc_to_choice(doc) == TASKS[task][1][0]["options"]


def _wordnet_missing() -> str | None:
    try:
        mc_tasks.wnr.require()
    except SystemExit as e:
        return str(e)
    return None


def test_build_refuses_without_wordnet_naming_the_package(tmp_path):
    with pytest.raises(SystemExit, match="apt-get install wordnet-base"):
        mc_tasks.wnr.require(tmp_path)


@pytest.mark.skipif(_wordnet_missing() is not None, reason=str(_wordnet_missing()))
def test_source_files_are_the_ones_the_snapshot_read():
    for path, digest in MANIFEST["source"]["files"].items():
        assert hashlib.sha256(open(path, "rb").read()).hexdigest() == digest, path


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("DEPTHPRUNE_REBUILD_MC") != "1" or _wordnet_missing() is not None,
                    reason="the full rebuild (~10 min) runs with DEPTHPRUNE_REBUILD_MC=1 where wordnet-base is installed")
def test_rebuild_is_byte_identical(tmp_path):
    manifest = mc_tasks.build(tmp_path, seeds=MANIFEST["parameters"]["seeds"], log=lambda s: None)
    assert manifest["sha256"] == MANIFEST["sha256"]


@pytest.mark.parametrize("model", ["smollm2-135m", "gemma3-270m"])
def test_frozen_dense_accuracy_is_well_above_chance(model):
    """The measured dense accuracies (depthprune measure wordnet-accuracy): every task's full test split,
    the headline metric >= chance + 10 points at the lower end of its clustered 95% interval."""
    from depthprune.cards.wordnet_accuracy import HEADLINE
    from depthprune.model import REAL_ASSETS

    path = REAL_ASSETS / "models" / model / "mc_tasks.json"
    measured = json.loads(path.read_text(encoding="utf-8"))
    assert measured["dtype"] == "torch.bfloat16" and set(measured["tasks"]) == {f"real_{t}" for t in mc_tasks.TASKS}
    for task in mc_tasks.TASKS:
        row = measured["tasks"][f"real_{task}"]
        assert row["n"] == mc_tasks.SIZES["test"] and row["headline"] == HEADLINE[task] == "acc"
        head = row[row["headline"]]
        assert head["cluster_bootstrap_95"][0] >= row["chance"] + 0.10, (model, task, head)
