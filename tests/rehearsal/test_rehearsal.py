"""The rehearsal's parts, without building the stand-ins: configs, tokenizers, the offline dataset
cache the stock lm-eval tasks read, the Commonsense-170k stand-in, and the checks' ability to fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from depthprune.data.profiles import PAPER
from depthprune.grid.cases import Cell, load_grid
from depthprune.model import PAPER_MODELS
from depthprune.rehearsal.stand_ins import STAND_INS, stand_in_config, tokenizer_config, tokenizer_json, train_bpe

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["The correct answer is answer1.", "Hello world, 12345 apples and 678 pears.",
         "Please choose the correct ending to complete the given sentence."] * 20


# -- stand-in models ---------------------------------------------------------------------------


@pytest.mark.parametrize("model_id", sorted(STAND_INS))
def test_stand_in_config_keeps_the_real_architecture(model_id):
    """Only width keys differ from the real config.json, in the real file's format; transformers
    builds the real class with the real layer count, GQA ratio, rope, q/k norm and untied head."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = STAND_INS[model_id]
    cfg = stand_in_config(spec)
    real = spec.real_config
    assert set(cfg) == set(real), "the stand-in's config.json must have the real file's keys"
    changed = {k for k in cfg if cfg[k] != real[k]}
    assert changed <= {"hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "head_dim"}
    assert cfg["num_attention_heads"] // cfg["num_key_value_heads"] == \
        real["num_attention_heads"] // real["num_key_value_heads"] == 4
    config = AutoConfig.for_model(**{k: v for k, v in cfg.items() if k not in ("architectures",
                                                                                "transformers_version")})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == real["architectures"][0]
    assert len(model.model.layers) == PAPER_MODELS[model_id].n_layers
    assert model.config.vocab_size == real["vocab_size"] and not model.config.tie_word_embeddings
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    rope = model.config.rope_parameters
    if model_id == "llama3.1-8b":
        assert rope["rope_type"] == "llama3" and rope["factor"] == 8.0
    else:
        assert rope["rope_type"] == "default"
    assert hasattr(model.model.layers[0].self_attn, "q_norm") == (model_id == "qwen3-8b")


@pytest.fixture(scope="module")
def bpe():
    return train_bpe(TEXTS, vocab_size=300)


def _tokenizer(tmp_path, model_id, bpe):
    from transformers import AutoTokenizer

    spec = STAND_INS[model_id].tokenizer
    tok_json = tokenizer_json(spec, *bpe)
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok_json))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(spec, tok_json)))
    return AutoTokenizer.from_pretrained(tmp_path)


def test_llama3_stand_in_tokenizer_prepends_bos_and_has_no_pad(tmp_path, bpe):
    tok = _tokenizer(tmp_path, "llama3-8b", bpe)
    ids = tok("Hello world")["input_ids"]
    assert ids[0] == 128000 and tok.bos_token_id == 128000 and tok.eos_token_id == 128001
    assert tok.pad_token is None, "LLaMA-3 has no pad token; load_model must supply one"
    assert tok.decode(ids[1:]) == "Hello world"
    assert tok.convert_tokens_to_ids("<|eot_id|>") == 128009 and len(tok) == 128256


def test_qwen3_stand_in_tokenizer_has_no_bos(tmp_path, bpe):
    tok = _tokenizer(tmp_path, "qwen3-8b", bpe)
    ids = tok("Hello world")["input_ids"]
    assert tok.bos_token is None and all(i < 151643 for i in ids)
    assert tok.eos_token_id == 151645 and tok.pad_token_id == 151643 and len(tok) == 151669
    assert tok.decode(ids) == "Hello world"


def test_special_ids_may_not_collide_with_the_bpe_vocabulary(bpe):
    spec = STAND_INS["llama3-8b"].tokenizer
    vocab, merges = bpe
    with pytest.raises(ValueError, match="overlaps the special ids"):
        tokenizer_json(spec, {**vocab, "x": spec.first_special_id}, merges)


# -- datasets where the paper loaders find them offline -----------------------------------------


@pytest.fixture
def datasets_cache(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets")
    return tmp_path / "datasets"


def test_stock_hellaswag_reads_the_cache_with_its_own_processing(datasets_cache):
    """lm-eval's stock task loads ``Rowan/hellaswag`` by name and runs its own process_docs on it."""
    import datasets
    from lm_eval.tasks.hellaswag.utils import process_docs

    from depthprune.rehearsal.datasets import _features, _task_splits, write_cache

    splits = _task_splits("hellaswag")
    write_cache(datasets_cache, "Rowan/hellaswag", None, splits, _features("hellaswag"))
    ds = datasets.load_dataset("Rowan/hellaswag")
    assert set(ds) == {"train", "validation", "test"}
    assert {r["label"] for r in ds["test"]} == {""}, "the real test split hides its labels"
    doc = process_docs(ds["validation"])[0]
    assert len(doc["choices"]) == 4 and doc["gold"] in range(4)


def test_commonsense_stand_in_has_the_real_record_fields(tmp_path, monkeypatch):
    """commonsense_170k.json behind DEPTHPRUNE_DATA_COMMONSENSE170K: the label form parses every record."""
    from depthprune.data.sources import load_choice_items

    records = json.loads((ROOT / "src/depthprune/assets/tiny/data/commonsense/train.json").read_text())
    path = tmp_path / "commonsense_170k.json"
    path.write_text(json.dumps(records[:50], indent=4))
    monkeypatch.setenv("DEPTHPRUNE_DATA_COMMONSENSE170K", str(path))
    items = load_choice_items(PAPER.source("commonsense170k"), 50, seed=0, answer="label")
    assert all(it.prompt.endswith("the correct answer is") for it in items)
    assert {len(it.choices) for it in items} >= {2, 4}
    assert all(c.startswith(" ") and c.strip()[-1].isdigit() or c.strip() in ("true", "false")
               for it in items for c in it.choices)


# -- the checks themselves can fail -------------------------------------------------------------


def test_cost_check_flags_counts_the_searcher_does_not_predict():
    from depthprune.rehearsal.checks import check_cost, expected_requests
    from depthprune.scoring.scorer import replay_cost

    grid = load_grid(ROOT / "cases" / "paper.toml")
    cell = Cell("paper", "llama3-8b", "ppl", "oneshot", 7)
    prior = [1.0 + 0.01 * ((7 * i) % 32) for i in range(32)]
    removed = sorted(range(32), key=lambda i: (prior[i], i))[:7]
    result = {"n_layers": 32, "prior": prior, "trace": [[sorted(removed), 2.0]],
              "cost": {"prior_evaluations": 32}}
    losses = {frozenset([i]): x for i, x in enumerate(prior)} | {frozenset(removed): 2.0}
    replay = replay_cost(expected_requests(result), losses, 32)
    result["cost"].update(evaluations=replay.evaluations, layer_forwards=replay.layer_forwards)
    assert replay.evaluations == 33 and check_cost(result, grid, cell) == []
    result["cost"]["layer_forwards"] += 1
    assert any("replay" in p for p in check_cost(result, grid, cell))
    result["cost"]["evaluations"] = 34
    assert any("predicts exactly 33" in p for p in check_cost(result, grid, cell))


# -- the runner's child environment -------------------------------------------------------------


def test_child_environment_adds_the_malloc_tunables_unless_the_user_set_them(tmp_path, monkeypatch):
    import platform

    from depthprune.rehearsal import MANIFEST
    from depthprune.rehearsal.command import GLIBC_TUNABLES, child_environment

    (tmp_path / MANIFEST).write_text(json.dumps({"environment": {"HF_HOME": str(tmp_path / "hf")}}))
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    env = child_environment(tmp_path, {"PATH": "/bin"})
    assert env == {"PATH": "/bin", "HF_HOME": str(tmp_path / "hf"), "GLIBC_TUNABLES": GLIBC_TUNABLES}
    assert child_environment(tmp_path, {"GLIBC_TUNABLES": "mine"})["GLIBC_TUNABLES"] == "mine"
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert "GLIBC_TUNABLES" not in child_environment(tmp_path, {})
