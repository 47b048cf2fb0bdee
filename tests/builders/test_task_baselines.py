"""Model-free baselines of every shipped task: the readers on constructed items, the frozen file against a
rebuild, and REPORT's rendering of it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from depthprune.builders import task_baselines as tb
from depthprune.cli import main as cli
from depthprune.report.baselines import render_task_baselines


class _Task:
    """The slice of lm-eval's Task that the readers use."""

    def __init__(self, docs, output_type="multiple_choice", train=None, partial=False):
        self.eval_docs, self.OUTPUT_TYPE, self._train, self.partial = docs, output_type, train, partial
        self.config = SimpleNamespace(test_split="test", validation_split=None)

    def has_training_docs(self):
        return self._train is not None

    def training_docs(self):
        return self._train

    def doc_to_text(self, doc):
        return doc["gold"] if self.partial else doc["q"]

    def doc_to_choice(self, doc):
        return doc["options"]

    def doc_to_target(self, doc):
        return doc["rest"] if self.partial else doc["gold"]


def _docs(n, gold_at):
    return [{"q": f"question {i} about stones", "options": [f"opt{i}a", f"opt{i}bb", f"opt{i}ccc"],
             "gold": gold_at(i), "rest": "was heavy."} for i in range(n)]


def test_a_position_leak_is_found_and_a_balanced_task_stays_at_chance():
    leaky = tb.task_baselines("leaky", _Task(_docs(60, lambda i: 0)))
    assert leaky.readers["position_0"]["acc"] == 1.0 and leaky.readers["position_0"]["lo"] > leaky.chance
    assert leaky.readers["shortest"]["acc"] == 1.0  # option 0 is also the shortest
    assert leaky.best()[0] == "position_0"
    balanced = tb.task_baselines("balanced", _Task(_docs(60, lambda i: i % 3)))
    assert all(abs(balanced.readers[f"position_{j}"]["acc"] - 1 / 3) < 1e-6 for j in range(3))  # rounded to 6 places
    assert balanced.chance == pytest.approx(1 / 3, abs=1e-6) and "option_only" not in balanced.readers


def test_option_only_needs_a_train_split_and_partial_scoring_reads_the_continuation():
    train = _docs(30, lambda i: 2)
    task = tb.task_baselines("trained", _Task(_docs(30, lambda i: 2), train=train))
    assert task.readers["option_only"]["acc"] > 0.9  # gold is always the 'ccc' option, learnable from options alone
    items = tb.mc_items(_Task(_docs(3, lambda i: 1), partial=True), _docs(3, lambda i: 1))
    assert [it["label"] for it in items] == [1, 1, 1] and items[0]["ctx"] == "was heavy."
    assert items[0]["options"] == ["opt0a", "opt0bb", "opt0ccc"] and items[0]["cluster"] == "0"


def test_cloze_copy_readers_count_a_random_pick_among_the_passage_words():
    items = [("Ulholm stone Verton stone went to", "Ulholm"), ("a dog saw a dog and a cat near the", "dog")]
    out = tb.cloze_outcomes(items)
    assert out["passage_word"] == [pytest.approx(1 / 5), pytest.approx(1 / 7)]  # distinct words, case kept
    assert out["passage_capitalised"] == [pytest.approx(1 / 2), 0.0]  # {Ulholm, Verton}; none in the second
    assert out["passage_frequent"] == [0.0, 1.0]  # 'stone' is the most frequent content word; then 'dog'
    vocabulary = {w for p, t in items for w in (*tb.words(p), t)}
    assert out["vocabulary_word"] == [1 / len(vocabulary)] * 2
    report = tb.cloze_report(items, ["a", "b"])
    assert report["vocabulary_word"]["chance"] == pytest.approx(1 / len(vocabulary), abs=1e-6)
    assert report["passage_frequent"]["acc"] == 0.5


def test_other_output_types_are_refused_with_the_task_and_what_is_allowed():
    with pytest.raises(ValueError, match="gen: output_type 'generate_until'.*allowed: multiple_choice, loglikelihood"):
        tb.task_baselines("gen", _Task(_docs(3, lambda i: 0), output_type="generate_until"))


@pytest.fixture(scope="module")
def rebuilt():
    return tb.build()  # every shipped task through lm-eval, ~12 s: once for the module


def test_the_frozen_file_is_what_a_rebuild_gives(rebuilt):
    assert not tb.stale(tb.FROZEN, rebuilt), "run depthprune build task-baselines"
    data = tb.load()
    assert {t["profile"] for t in data["tasks"].values()} == set(tb.SHIPPED)
    assert len(data["tasks"]) == sum(len(v) for v in tb.SHIPPED.values())


def test_check_fails_on_a_stale_file_and_build_writes_a_fresh_one(rebuilt, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tb, "build", lambda seed=tb.SEED: rebuilt)
    path = tmp_path / "baselines.json"
    data = tb.load()
    data["tasks"]["tiny_piqa"]["readers"]["longest"]["acc"] += 0.01
    path.write_text(json.dumps(data))
    assert cli(["build", "task-baselines", "check", "--out", str(path)]) == 1
    assert "differs from a rebuild" in capsys.readouterr().err
    assert cli(["build", "task-baselines", "--out", str(path)]) == 0
    assert cli(["build", "task-baselines", "check", "--out", str(path)]) == 0


def test_report_shows_every_task_with_its_best_reader_and_interval_and_every_reader_on_its_page(tmp_path):
    head, page = render_task_baselines()
    data = tb.load()
    text, full = "\n".join(head), "\n".join(page)
    for name, task in data["tasks"].items():
        best, b = max(sorted(task["readers"].items()), key=lambda kv: kv[1]["acc"])
        assert f"| {name} " in text and best in text
        assert f"{b['acc']:.3f}\u00a0[{b['lo']:.3f},\u00a0{b['hi']:.3f}]" in text
        assert f"## {name}" in full
        for reader, v in task["readers"].items():
            assert reader in full and f"{v['acc']:.3f}\u00a0[{v['lo']:.3f},\u00a0{v['hi']:.3f}]" in full
    assert render_task_baselines(tmp_path / "absent.json") == ([], [])
