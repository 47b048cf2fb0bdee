"""The real profile's frozen data (Python's documentation) and its two lm-eval tasks; no model needed."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from depthprune.builders import python_docs as build
from depthprune.data.profiles import get_profile
from depthprune.model import REAL_ASSETS

MANIFEST = build.read_manifest()


def test_every_shipped_file_matches_the_frozen_manifest():
    shipped = sorted(p.relative_to(REAL_ASSETS).as_posix() for root in (build.DATA, build.TASKS / "data")
                     for p in root.rglob("*") if p.is_file() and p.name != "manifest.json"
                     and build.HEALING not in p.parents)  # the healing text has its own manifest
    assert shipped == sorted(MANIFEST["sha256"])
    for rel, digest in MANIFEST["sha256"].items():
        assert hashlib.sha256((REAL_ASSETS / rel).read_bytes()).hexdigest() == digest, rel
    assert MANIFEST["license"].startswith("Python Software Foundation License")
    assert (build.DATA / "LICENSE-PSF.txt").is_file()


def test_split_by_document():
    splits = {name: build.frozen_split(name) for name in build.SPLITS}
    topics = {name: [d["topic"] for d in docs] for name, docs in splits.items()}
    everything = [t for ts in topics.values() for t in ts]
    assert len(everything) == len(set(everything)) == MANIFEST["documents"]
    words = {name: sum(len(d["text"].split()) for d in docs) for name, docs in splits.items()}
    total = sum(words.values())
    assert total == MANIFEST["words"]
    assert words["test"] >= 0.30 * total and words["validation"] >= 0.15 * total
    assert words["calibration"] > words["test"]


@pytest.mark.skipif(sys.version.split()[0] != MANIFEST["python"],
                    reason=f"the snapshot came from Python {MANIFEST['python']}; pydoc_data differs between versions")
def test_snapshot_rebuilds_from_this_interpreter():
    docs = build.topics()
    split, group_of = build.split_documents(docs), build.document_groups(docs)
    for name in build.SPLITS:
        assert build.frozen_split(name) == [{"topic": t, "group": group_of[t], "text": docs[t]}
                                            for t in sorted(split[name])]


def test_tasks_rebuild_from_the_frozen_splits():
    test_docs = build.frozen_split("validation") + build.frozen_split("test")
    calib = build.frozen_split("calibration")
    data = build.TASKS / "data"
    assert build.read_jsonl(data / "real_lambada" / "test.jsonl") == build.lambada_items(test_docs)
    assert build.read_jsonl(data / "real_nextsent" / "test.jsonl") == build.nextsent_items(test_docs, 1)
    train = build.nextsent_items(calib, 2)
    assert build.read_jsonl(data / "real_nextsent" / "train.jsonl") == train
    records = json.loads((build.DATA / "commonsense" / "train.json").read_text())
    assert records == [build.commonsense_record(item) for item in train]


def test_nextsent_items_are_well_formed():
    held_out = build.frozen_split("validation") + build.frozen_split("test")
    docs = {d["topic"]: build._clean(d["text"]) for d in held_out}  # footnote marks removed, as in items
    group_text = {}
    for d in held_out:
        group_text[d["group"]] = group_text.get(d["group"], "") + " " + build._clean(d["text"])
    for item in build.read_jsonl(build.TASKS / "data" / "real_nextsent" / "test.jsonl"):
        assert len(item["endings"]) == 4 and len(set(item["endings"])) == 4 and 0 <= item["label"] < 4
        gold = item["endings"][item["label"]]
        assert build.eligible(gold)
        assert gold in docs[item["topic"]]
        for k, ending in enumerate(item["endings"]):
            if k != item["label"]:  # distractors come from other documents, in no document of the item's group
                assert ending not in group_text[held_out_group(held_out, item["topic"])]


def held_out_group(docs, topic):
    return next(d["group"] for d in docs if d["topic"] == topic)


def test_no_sentence_is_in_two_splits():
    sentences = {}
    for name in build.SPLITS:
        for doc in build.frozen_split(name):
            for run in build.prose_runs(doc["text"]):
                for s in build.run_sentences(run):
                    if build.eligible(build._clean(s)):
                        sentences.setdefault(build._clean(s), set()).add(name)
    shared = [s for s, names in sentences.items() if len(names) > 1]
    assert not shared, shared[:3]


def test_lambada_targets_are_recoverable_from_the_passage():
    for item in build.read_jsonl(build.TASKS / "data" / "real_lambada" / "test.jsonl"):
        *context, target = item["text"].split(" ")
        assert target.isalpha() and len(target) >= 4
        assert target.lower() in " ".join(context).lower()


@pytest.mark.parametrize("answer", ["label", "cloze", "option"])
def test_commonsense_records_parse_in_every_answer_form(answer):
    from depthprune.data.sources import load_choice_items, parse_commonsense_record

    train = build.read_jsonl(build.TASKS / "data" / "real_nextsent" / "train.jsonl")
    records = json.loads((build.DATA / "commonsense" / "train.json").read_text())
    for item, record in zip(train, records):
        parsed = parse_commonsense_record(record, answer=answer)
        assert parsed.gold == item["label"]
        if answer == "label":
            assert parsed.choices == (" ending1", " ending2", " ending3", " ending4")
        else:
            assert parsed.choices == tuple(f" {e}" for e in item["endings"])
        if answer == "cloze":  # the ending path: the option continues the two-sentence context
            assert parsed.prompt == item["ctx"]
    items = load_choice_items(get_profile("real").source("commonsense170k"), 32, 0, answer=answer)
    assert len(items) == 32


def test_real_profile():
    real = get_profile("real")
    assert real.source("c4_train").data_files["train"].endswith("calibration.jsonl")
    assert real.source("c4_validation").data_files["validation"].endswith("validation.jsonl")
    assert real.source("wikitext2").data_files["test"].endswith("test.jsonl")
    assert real.source("commonsense170k").data_files["train"].endswith("mc_train.json")  # the WordNet tasks' train
    assert real.source("nextsent170k").data_files["train"].endswith("commonsense/train.json")
    cfg = real.eval_config()
    assert cfg.tasks == ("hypernym", "definition", "cloze")  # real_nextsent only where a grid names it
    assert real.eval_config(tasks=("nextsent",)).tasks == ("nextsent",)
    assert real.lm_eval_task("nextsent") == "real_nextsent" and real.lm_eval_task("lambada") == "real_lambada"
    assert real.lm_eval_task("cloze") == "real_cloze"
    assert real.headline_metric("nextsent") == "acc_norm" and real.headline_metric("hypernym") == "acc"
    with pytest.raises(ValueError, match="allowed: hypernym, definition, cloze, nextsent"):
        real.eval_config(tasks=("hellaswag",))
    # the paper's and the tiny profile's settings are unchanged
    paper, tiny = get_profile("paper"), get_profile("tiny")
    assert paper.eval_config().tasks == tiny.eval_config().tasks == (
        "hellaswag", "winogrande", "arc_easy", "arc_challenge", "piqa", "boolq")
    with pytest.raises(ValueError, match="unknown task"):
        paper.eval_config(tasks=("nextsent",))
    assert paper.headline_metric("hellaswag") == "acc_norm" and paper.headline_metric("piqa") == "acc"


def test_real_tasks_load_in_lm_eval():
    from lm_eval.tasks import get_task_dict

    tasks = get_task_dict(["real_nextsent", "real_lambada"], get_profile("real").task_manager())
    nextsent, lambada = tasks["real_nextsent"], tasks["real_lambada"]
    docs = list(nextsent.test_docs())
    assert len(docs) == MANIFEST["tasks"]["real_nextsent"]["test"]
    assert nextsent.doc_to_text(docs[0]) == docs[0]["ctx"]
    assert nextsent.doc_to_choice(docs[0]) == docs[0]["endings"]
    ldocs = list(lambada.test_docs())
    assert len(ldocs) == MANIFEST["tasks"]["real_lambada"]["test"]
    assert lambada.doc_to_target(ldocs[0]) == " " + ldocs[0]["text"].split(" ")[-1]


def test_shipped_task_loaders_are_what_the_builders_write():
    """The tiny and real profiles' lm-eval ``utils.py`` are generated from one template."""
    from depthprune.builders.python_docs import _UTILS
    from depthprune.model import REAL_ASSETS, TINY_ASSETS
    from depthprune.tiny.fixtures import UTILS_PY

    assert (REAL_ASSETS / "tasks" / "utils.py").read_text(encoding="utf-8") == _UTILS
    assert (TINY_ASSETS / "tasks" / "utils.py").read_text(encoding="utf-8") == UTILS_PY
