"""Tests of the shipped tiny family (generator, tokenizer, models, fixtures)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import depthprune

ASSETS = Path(depthprune.__file__).resolve().parent / "assets" / "tiny"
MODELS = ["tiny-llama3", "tiny-llama3.1", "tiny-qwen3"]
ARCH = {"tiny-llama3": "LlamaForCausalLM", "tiny-llama3.1": "LlamaForCausalLM", "tiny-qwen3": "Qwen3ForCausalLM"}
TASKS = ["tiny_hellaswag", "tiny_winogrande", "tiny_arc_easy", "tiny_arc_challenge", "tiny_piqa", "tiny_boolq",
         "tiny_lambada"]


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path, monkeypatch):
    """Every test runs from an unrelated working directory."""
    monkeypatch.chdir(tmp_path)


# -- generator ---------------------------------------------------------------
def test_corpus_deterministic_in_seed():
    from depthprune.tiny.corpus import documents
    from depthprune.tiny.world import World

    a = list(documents(World(0), 30, seed=0))
    b = list(documents(World(0), 30, seed=0))
    c = list(documents(World(1), 30, seed=0))
    d = list(documents(World(0), 30, seed=1))
    assert a == b
    assert a != c and a != d


def test_world_splits_disjoint():
    from depthprune.tiny.world import World

    w = World(0)
    train = {p.first for p in w.pool("train")}
    held = {p.first for p in w.pool("heldout")}
    assert train and held and not train & held
    for p in w.pool("heldout"):
        for rel in (p.sibling, p.friend):
            assert rel is None or w.people[rel].split == "heldout"


# -- tokenizer ---------------------------------------------------------------
def test_tokenizer_round_trip_and_specials():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ASSETS / "tokenizer")
    text = "Mira Talden lives in Brenvale.\n\n = = History = = \nShe has 12 cats, and 3 dogs! é ü 漢"
    ids = tok(text)["input_ids"]
    assert ids[0] == tok.bos_token_id
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert {tok.bos_token, tok.eos_token, tok.pad_token} == {"<|begin_of_text|>", "<|end_of_text|>", "<|pad|>"}
    assert len({tok.bos_token_id, tok.eos_token_id, tok.pad_token_id}) == 3
    assert tok.convert_ids_to_tokens(tok("1234", add_special_tokens=False)["input_ids"]) == ["1", "2", "3", "4"]


# -- models ------------------------------------------------------------------
def _c4_windows(tok, n=4, seq_len=128):
    import torch

    rows = []
    with open(ASSETS / "data" / "c4" / "validation.jsonl", encoding="utf-8") as f:
        for line in f:
            ids = tok(json.loads(line)["text"])["input_ids"]
            if len(ids) >= seq_len:
                rows.append(ids[:seq_len])
            if len(rows) == n:
                break
    return torch.tensor(rows)


@pytest.mark.parametrize("name", MODELS)
def test_model_loads_and_beats_random(name):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    d = ASSETS / "models" / name
    for f in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
              "tokenizer_config.json", "card.json", "README.md"):
        assert (d / f).is_file(), f
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    assert type(model).__name__ == ARCH[name]
    assert 12 <= model.config.num_hidden_layers <= 16
    assert model.config.vocab_size >= len(tok)
    x = _c4_windows(tok)
    with torch.no_grad():
        loss = model(input_ids=x, labels=x).loss.item()
        torch.manual_seed(0)
        rand = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(d)).float().eval()
        rand_loss = rand(input_ids=x, labels=x).loss.item()
    card = json.loads((d / "card.json").read_text())
    assert rand_loss > 0.8 * math.log(model.config.vocab_size)  # ~uniform
    assert loss < 3.0, loss  # a random model is near ln(4096) = 8.3
    assert loss < rand_loss - 4.0
    assert card["n_layers"] == model.config.num_hidden_layers and card["validation_loss"]


def test_training_step_is_deterministic(tmp_path):
    """Two short runs of the real recipe (same seed, one thread) give identical weights."""
    import dataclasses

    import numpy as np
    import torch
    from safetensors.torch import load_file

    from depthprune.tiny.train import SPECS, train_model

    rows = np.random.default_rng(0).integers(3, 4096, size=(8, 64)).astype(np.uint16)
    spec = dataclasses.replace(SPECS["tiny-llama3"], steps=2, batch_size=2, seq_len=64, warmup=1,
                               config=dict(SPECS["tiny-llama3"].config, num_hidden_layers=2))
    outs = []
    for i in range(2):
        out = tmp_path / f"run{i}"
        train_model(spec, rows, {"v": rows[:2]}, out, ASSETS / "tokenizer", ASSETS / "models", threads=1)
        outs.append(load_file(str(out / "model.safetensors")))
        assert (out / "card.json").is_file() and (out / "README.md").is_file()
    assert outs[0].keys() == outs[1].keys()
    assert all(torch.equal(outs[0][k], outs[1][k]) for k in outs[0])


def test_models_small_enough():
    total = sum((ASSETS / "models" / m / "model.safetensors").stat().st_size for m in MODELS)
    assert total <= 40 * 2 ** 20


# -- fixtures ----------------------------------------------------------------
def test_lm_eval_tasks_load_from_any_cwd():
    from lm_eval.tasks import TaskManager, get_task_dict

    tm = TaskManager(include_path=str(ASSETS / "tasks"), include_defaults=False)
    assert set(TASKS) <= set(tm.all_tasks)
    tasks = get_task_dict(TASKS, tm)
    for name in TASKS:
        task = tasks[name]
        docs = list(task.eval_docs)
        assert 150 <= len(docs) <= 300, (name, len(docs))
        doc = docs[0]
        assert task.doc_to_text(doc) is not None
        if name == "tiny_lambada":
            assert task.OUTPUT_TYPE == "loglikelihood"
            assert task.doc_to_target(doc).startswith(" ")
        else:
            assert task.OUTPUT_TYPE == "multiple_choice"
            choices = task.doc_to_choice(doc)
            assert 2 <= len(choices) <= 4
            assert 0 <= int(task.doc_to_target(doc) if name != "tiny_winogrande" else task.doc_to_text(doc)) < len(choices)


def test_commonsense_records_parse():
    from depthprune.tiny.fixtures import parse_answer_format

    recs = json.loads((ASSETS / "data" / "commonsense" / "train.json").read_text())
    assert len(recs) >= 128
    seen = set()
    for r in recs:
        assert set(r) == {"instruction", "input", "output", "answer"} and r["input"] == ""
        labels = parse_answer_format(r["instruction"])
        assert r["answer"] in labels and len(labels) >= 2
        assert r["output"] == f"the correct answer is {r['answer']}"
        seen.add(tuple(labels))
    assert ("true", "false") in seen and ("option1", "option2") in seen and ("solution1", "solution2") in seen
    assert ("ending1", "ending2", "ending3", "ending4") in seen
    assert ("answer1", "answer2", "answer3", "answer4") in seen


def test_text_fixtures_shape():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ASSETS / "tokenizer")
    with open(ASSETS / "data" / "c4" / "train.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line)["text"] for line in f]
    long = sum(len(tok(d)["input_ids"]) >= 160 for d in docs[:300])
    assert long >= 0.8 * 300
    with open(ASSETS / "data" / "wikitext" / "test.jsonl", encoding="utf-8") as f:
        lines = [json.loads(line)["text"] for line in f]
    assert any(t.startswith(" = ") and not t.startswith(" = = ") for t in lines)
    assert any(t.startswith(" = = ") for t in lines) and "" in lines
    with open(ASSETS / "data" / "lambada" / "test.jsonl", encoding="utf-8") as f:
        passages = [json.loads(line)["text"] for line in f]
    from depthprune.tiny.world import JOBS

    for p in passages:
        head, last = p.rsplit(" ", 1)
        final_sentence = head.rsplit(". ", 1)[-1]
        assert last not in final_sentence
        # the answer is in the wider passage, or is the workplace of the job it names
        assert last in head or any(f"as a {j} " in head or f"as an {j} " in head
                                   for j, d in JOBS.items() if d["place"].endswith(" " + last))
