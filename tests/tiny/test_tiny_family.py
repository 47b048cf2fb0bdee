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


# -- quality check (depthprune.tiny.check) -----------------------------------
# The tests of ``checked`` on one xdist worker, so that its ~30 s check runs once, not on both.
_ON_ONE_WORKER = pytest.mark.xdist_group("tiny-check")


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """``check_model`` on a copy of tiny-llama3, small sizes: lm-eval limited to 2 items per task, perplexity on 4
    windows of C4 (the profile's 88 of WikiText and 64 of C4 took ~7 s of the fixture's 28, 1 thread); what these tests
    check of the perplexity is that the card and README carry it."""
    import shutil

    from depthprune.tiny.check import check_model

    d = tmp_path_factory.mktemp("check") / "tiny-llama3"
    shutil.copytree(ASSETS / "models" / "tiny-llama3", d)
    res = check_model(d, n_samples=4, n_items=16, limit=2, eval_settings={"perplexity": ("c4",), "c4_windows": 4})
    return d, res


def _naive_options(model, tok, items):
    """Per item: mean log-prob of each option's tokens, one plain full forward per option."""
    import torch

    out = []
    with torch.no_grad():
        for it in items:
            ctx = tok(it.prompt)["input_ids"]
            ells = []
            for choice in it.choices:
                ans = tok(choice, add_special_tokens=False)["input_ids"]
                lp = torch.log_softmax(model(input_ids=torch.tensor([ctx + ans])).logits[0].float(), -1)
                ells.append(float(sum(lp[len(ctx) - 1 + k, t] for k, t in enumerate(ans)) / len(ans)))
            out.append(ells)
    return out


@_ON_ONE_WORKER
def test_check_margin_and_accuracy_match_plain_forwards(checked):
    """Margins and accuracies in the card equal per-option full forwards of the dense model."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from depthprune.data.profiles import TINY
    from depthprune.data.sources import load_choice_items

    d, res = checked
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
    for answer in ("cloze", "label", "option"):
        entry = res["dense"][f"margin_{answer}"]
        assert entry["objective"]["answer"] == answer and entry["objective"]["n_items"] == 16
        items = load_choice_items(TINY.source("commonsense170k"), 16, 0, answer=answer)
        ells = _naive_options(model, tok, items)
        margins = [sum(e[it.gold] - x for j, x in enumerate(e) if j != it.gold) for it, e in zip(items, ells)]
        acc = sum(max(range(len(e)), key=e.__getitem__) == it.gold for it, e in zip(items, ells)) / len(items)
        assert entry["mean_margin"] == pytest.approx(sum(margins) / len(margins), abs=2e-4), answer
        assert entry["accuracy"] == pytest.approx(acc), answer


@_ON_ONE_WORKER
def test_check_sweep_is_single_block_removal(checked):
    """A sweep entry equals the loss of the physically pruned model minus the dense loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from depthprune.data.profiles import TINY
    from depthprune.data.sources import calibration_windows, load_texts
    from depthprune.model.masking import prune_layers

    d, res = checked
    sweep = res["single_layer_removal"]
    n_layers = json.loads((d / "card.json").read_text())["n_layers"]
    assert all(len(sweep[k]) == n_layers for k in ("ppl_c4_train", "ppl_c4_validation", "margin_cloze",
                                                     "margin_label", "margin_option"))
    tok = AutoTokenizer.from_pretrained(d)
    windows, _ = calibration_windows(load_texts(TINY.source("c4_validation")), tok, 4, 128, 0)

    def nll(m):
        with torch.no_grad():
            return m(input_ids=windows, labels=windows).loss.item()

    dense = nll(AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval())
    assert res["dense"]["ppl_c4_validation"]["loss"] == pytest.approx(dense, abs=2e-4)
    for block in (3, n_layers - 1):
        pruned = prune_layers(AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval(), [block])
        assert sweep["ppl_c4_validation"][block] == pytest.approx(nll(pruned) - dense, abs=3e-4), block


@_ON_ONE_WORKER
def test_check_writes_card_and_readme(checked):
    d, res = checked
    card = json.loads((d / "card.json").read_text())
    assert card["evaluation"] == json.loads(json.dumps(res))
    lm = res["lm_eval"]
    assert lm["limit"] == 2 and set(TASKS) <= set(lm)
    assert all(0 <= lm[t]["acc"] <= 1 for t in TASKS)
    assert '"/' not in json.dumps(res)  # no absolute paths of this machine
    readme = (d / "README.md").read_text()
    assert "## Measured quality" in readme and "| tiny_hellaswag |" in readme and "| 15 |" in readme
    assert res["perplexity"]["protocol"]["c4"]["n_samples"] == 4 and "| c4_ppl |" in readme


@pytest.mark.parametrize("name", MODELS)
def test_shipped_cards_come_from_the_core(name):
    """The committed cards hold the current check's sections, at the tiny profile's sizes, and
    their dense validation loss is what the ppl objective measures now (a stale card fails)."""
    from depthprune.data.profiles import TINY
    from depthprune.objectives import make_objective
    from depthprune.recipe import Session
    from depthprune.scoring.scorer import Scorer

    ev = json.loads((ASSETS / "models" / name / "card.json").read_text())["evaluation"]
    assert ev["dense"]["ppl_c4_train"]["objective"] == {"dataset": "c4_train", "seed": 0,
                                                        **TINY.objective_params("ppl")}
    for answer in ("cloze", "label", "option"):
        params = ev["dense"][f"margin_{answer}"]["objective"]
        assert params["answer"] == answer and params["n_items"] == TINY.objective_params("margin")["n_items"]
    assert ev["lm_eval"]["limit"] is None and set(TASKS) <= set(ev["lm_eval"])
    assert ev["lm_eval"]["tiny_hellaswag"]["acc_norm"] > 0.25 + 0.2  # well above chance
    session = Session.open(name, device="cpu", dtype="float32")
    # what session.calibrate("ppl", dataset="c4_validation") measures first (recipe.Calibration.build): its dense
    # scorer, then the single [0], the same bits as its prior[0]; the other singles of its prior are not compared
    objective = make_objective("ppl", session.profile, dataset="c4_validation")
    scorer = Scorer(session.model, objective.prepare(session.tokenizer, session.profile, session.batch_size), objective)
    assert len(ev["single_layer_removal"]["ppl_c4_validation"]) == session.n_layers
    assert ev["dense"]["ppl_c4_validation"]["loss"] == pytest.approx(scorer.dense_loss, abs=1e-4)
    assert ev["single_layer_removal"]["ppl_c4_validation"][0] == pytest.approx(
        scorer(frozenset([0])) - scorer.dense_loss, abs=1e-4)
