"""Data protocols: windows are deterministic, sized as asked, and cut as documented."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import warnings
from pathlib import Path

import pytest

from depthprune.data.profiles import PAPER, get_profile
from depthprune.data.sources import (
    DataUnavailable,
    calibration_windows,
    eval_windows,
    load_texts,
    parse_commonsense_record,
)
from tests.fixtures import char_tokenizer, random_text


def test_calibration_windows_deterministic_and_inside_one_document():
    tok = char_tokenizer()
    docs = random_text(30, 30, seed=1)
    a, proto = calibration_windows(docs, tok, n_samples=10, seq_len=32, seed=0)
    b, _ = calibration_windows(docs, tok, n_samples=10, seq_len=32, seed=0)
    c, _ = calibration_windows(docs, tok, n_samples=10, seq_len=32, seed=1)
    assert a.shape == (10, 32) and a.equal(b) and not a.equal(c)
    assert proto.kind == "random-doc" and proto.seed == 0
    encoded = [tok(d)["input_ids"] for d in docs]
    for row in a.tolist():
        assert any(any(ids[i : i + 32] == row for i in range(len(ids) - 31)) for ids in encoded)


def test_calibration_windows_refuse_impossible_lengths():
    with pytest.raises(DataUnavailable, match="longer than seq_len"):
        calibration_windows(["short doc"], char_tokenizer(), n_samples=2, seq_len=64)


def test_eval_windows_are_contiguous_and_non_overlapping():
    tok = char_tokenizer()
    texts = random_text(10, 20, seed=2)
    windows, proto = eval_windows(texts, tok, seq_len=16)
    ids = tok("\n\n".join(texts))["input_ids"]
    assert windows.shape[0] == len(ids) // 16
    assert windows.flatten().tolist() == ids[: windows.numel()]
    assert proto.stride == 16 and proto.joiner == "\n\n"
    assert eval_windows(texts, tok, seq_len=16, max_windows=3)[0].shape == (3, 16)


def test_commonsense_record_parsing():
    record = {
        "instruction": "Please choose the correct answer to the question: Where do fish live?\n\n"
        "Answer1: sea Answer2: sky Answer3: desert\n\nAnswer format: answer1/answer2/answer3",
        "input": "",
        "output": "the correct answer is answer1",
        "answer": "answer1",
    }
    item = parse_commonsense_record(record)
    assert item.choices == (" answer1", " answer2", " answer3") and item.gold == 0
    assert item.prompt.endswith("Answer format: answer1/answer2/answer3\n\nthe correct answer is")
    with pytest.raises(ValueError, match="not one of the options"):
        parse_commonsense_record({**record, "answer": "answer4"})
    with pytest.raises(ValueError, match="Answer format"):
        parse_commonsense_record({**record, "instruction": "no options here"})


@pytest.mark.parametrize(
    "instruction, texts",
    [
        ("Fill the blank: _ despised intestine.\n\nOption1: Ian\nOption2: Dennis Answer format: option1/option2",
         (" Ian", " Dennis")),
        ("Pick an ending: He\n\nEnding1: sat down.\n\nEnding2: ran off quickly.\n\nAnswer format: ending1/ending2",
         (" sat down.", " ran off quickly.")),
        ("Is it wet? answer with true or false\n\nAnswer format: true/false", (" true", " false")),
    ],
)
def test_commonsense_option_texts(instruction, texts):
    labels = instruction.rsplit(": ", 1)[1].split("/")
    item = parse_commonsense_record({"instruction": instruction, "answer": labels[1]}, answer="option")
    assert item.choices == texts and item.gold == 1
    assert parse_commonsense_record({"instruction": instruction, "answer": labels[0]}).choices == tuple(
        f" {x}" for x in labels)


@pytest.mark.parametrize(
    "instruction, context, choices",
    [
        ("Please fill the blank: The cup broke, so _ swept it up.\n\nOption1: Ian\n\nOption2: Dennis\n\n"
         "Answer format: option1/option2", "The cup broke, so", (" Ian swept it up.", " Dennis swept it up.")),
        ("Please choose the ending: Cooking: He\n\nEnding1: sat down.\n\nEnding2: ran off.\n\n"
         "Answer format: ending1/ending2", "Cooking: He", (" sat down.", " ran off.")),
        ("Please answer with true or false, question: is ice cold?\n\nAnswer format: true/false",
         "Question: is ice cold?\nAnswer:", (" true", " false")),
        ("Please choose the correct solution to the question: To eat soup,\n\nSolution1: Use a rope.\n\n"
         "Solution2: Use a spoon.\n\nAnswer format: solution1/solution2",
         "Question: To eat soup,\nAnswer:", (" Use a rope.", " Use a spoon.")),
    ],
)
def test_commonsense_cloze_form(instruction, context, choices):
    labels = instruction.rsplit(": ", 1)[1].split("/")
    item = parse_commonsense_record({"instruction": instruction, "answer": labels[1]}, answer="cloze")
    assert (item.prompt, item.choices, item.gold) == (context, choices, 1)
    with pytest.raises(ValueError, match="answer must be one of"):
        parse_commonsense_record({"instruction": instruction, "answer": labels[1]}, answer="letter")


def test_source_override_by_environment(tmp_path, monkeypatch):
    path = tmp_path / "my.jsonl"
    path.write_text(json.dumps({"text": "hello"}) + "\n")
    monkeypatch.setenv("DEPTHPRUNE_DATA_C4_TRAIN", str(path))
    assert load_texts(PAPER.source("c4_train")) == ["hello"]


def test_unknown_names_and_missing_files(tmp_path):
    with pytest.raises(ValueError, match="allowed"):
        PAPER.source("c5")
    with pytest.raises(ValueError, match="allowed"):
        get_profile("huge")
    from depthprune.data.sources import TextSource

    with pytest.raises(DataUnavailable, match="not found"):
        load_texts(TextSource("json", data_files={"train": str(tmp_path / "none.jsonl")}))


def test_cloze_ending_with_one_underscore_in_the_stem_is_not_a_blank():
    """An ``endingK`` record continues its stem even where the stem holds one ``_`` (a name like
    ``exc_info``): only non-ending records with a single ``_`` are fill-in-the-blank."""
    from depthprune.data.sources import parse_commonsense_record

    record = {
        "instruction": "Please choose the correct ending to complete the given sentence: Call sys.exc_info() to "
                       "get the exception.\n\nEnding1: It returns a tuple.\n\nEnding2: Birds fly.\n\n"
                       "Answer format: ending1/ending2",
        "input": "", "output": "the correct answer is ending1", "answer": "ending1",
    }
    item = parse_commonsense_record(record, answer="cloze")
    assert item.prompt == "Call sys.exc_info() to get the exception."
    assert item.choices == (" It returns a tuple.", " Birds fly.") and item.gold == 0


def _hub_snapshot(hub: Path, repo_id: str, name: str, data: bytes) -> None:
    """One dataset file in the Hub cache's layout (refs/main -> snapshots/<rev>/<name> -> blobs/<sha256>)."""
    repo = hub / f"datasets--{repo_id.replace('/', '--')}"
    blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
    blob.parent.mkdir(parents=True)
    blob.write_bytes(data)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    link = repo / "snapshots" / ("0" * 40) / name
    link.parent.mkdir(parents=True)
    os.symlink(os.path.relpath(blob, link.parent), link)


def test_c4_shard_in_the_hub_cache_is_read_offline(tmp_path, monkeypatch):
    """Offline, datasets cannot load ``allenai/c4`` with ``data_files`` even when the shard is on disk
    (huggingface/datasets#6837); the paper profile's own source now reads the Hub cache's shard."""
    import datasets
    import huggingface_hub.constants

    from depthprune.data.sources import DataUnavailable, load_records

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    src = PAPER.sources["c4_train"]
    with pytest.raises(DataUnavailable, match="allenai/c4"):
        load_records(src)  # nothing cached: the error names the Hub id
    rows = [{"text": f"doc {i}", "timestamp": "2019-04-25T12:57:54Z", "url": f"https://x.invalid/{i}"}
            for i in range(3)]
    _hub_snapshot(tmp_path / "hub", src.path, src.data_files["train"],
                  gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode(), mtime=0))
    assert [r["text"] for r in load_records(PAPER.source("c4_train"))] == ["doc 0", "doc 1", "doc 2"]
    with pytest.raises(DataUnavailable, match="allenai/c4"):
        load_records(PAPER.sources["c4_validation"])  # another shard, not cached


def test_eval_windows_records_a_shortfall():
    """Fewer windows than asked (C4's 1100-document prefix with a large vocabulary) warn and are recorded."""
    from depthprune.data.sources import eval_windows
    from tests.fixtures import char_tokenizer

    tok = char_tokenizer()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        windows, protocol = eval_windows(["abcdefghij"] * 3, tok, 8, joiner=" ", max_windows=10)
    assert windows.shape == (4, 8) and protocol.n_samples == 4
    assert protocol.extra == {"requested_windows": 10, "text_tokens": 33}
    assert any("fewer than the 10 asked for" in str(w.message) for w in caught)
    _, full = eval_windows(["abcdefghij"] * 3, tok, 8, joiner=" ", max_windows=2)
    assert full.n_samples == 2 and full.extra["requested_windows"] == 2


def test_the_paper_profiles_stock_tasks_are_indexed_alone_and_another_task_gets_the_whole_index(monkeypatch):
    """lm-eval's index of every stock task took 11-12 s per process; the paper's tasks are read from the same
    YAML files when their folders are indexed alone (profiles.Profile.stock_task_dirs)."""
    from pathlib import Path

    import lm_eval

    names = [PAPER.lm_eval_task(t) for t in (*PAPER.tasks, "lambada")]
    manager = PAPER.task_manager(names)
    root = Path(lm_eval.__file__).parent / "tasks"
    for name in names:
        where = Path(manager.task_index[name].yaml_path).relative_to(root)
        assert any(where.as_posix().startswith(d + "/") for d in PAPER.stock_task_dirs), (name, where)
    whole = object()  # a stand-in for the whole index, which is not built here
    monkeypatch.setitem(PAPER.__dict__, "_every_stock_task", whole)
    assert PAPER.task_manager(["openbookqa"]) is whole and PAPER.task_manager(names) is manager
