"""Objectives agree with independent, unbatched computations from the model's own logits."""

from __future__ import annotations

import json

import pytest
import torch

from depthprune.data.profiles import PAPER, get_profile
from depthprune.data.sources import load_choice_items
from depthprune.model.masking import skip_layers
from depthprune.objectives import make_objective
from depthprune.scoring.scorer import Scorer
from tests.fixtures import char_tokenizer, random_model, random_text, write_jsonl

LABELS = ["yes", "no", "maybe"]  # the character tokenizer has no digits


@pytest.fixture
def commonsense_file(tmp_path, monkeypatch):
    records = []
    for i, text in enumerate(random_text(12, 8, seed=3)):
        k = 2 + i % 2
        labels = LABELS[:k]
        options = " ".join(f"{lab.capitalize()}: {w}" for lab, w in zip(labels, text.split()[:k]))
        records.append({
            "instruction": f"Please choose the correct answer to the question: {text}\n\n{options}\n\n"
                           f"Answer format: {'/'.join(labels)}",
            "input": "", "output": f"the correct answer is {labels[i % k]}", "answer": labels[i % k],
        })
    path = tmp_path / "cs.json"
    path.write_text(json.dumps(records))
    monkeypatch.setenv("DEPTHPRUNE_DATA_COMMONSENSE170K", str(path))
    return path


def _mean_answer_logprob(model, tok, prompt, choice):
    ctx = tok(prompt)["input_ids"]
    ans = tok(choice, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([ctx + ans])
    logp = torch.log_softmax(model(ids, use_cache=False).logits[0].float(), -1)
    return sum(logp[len(ctx) - 1 + t, a].item() for t, a in enumerate(ans)) / len(ans)


@pytest.mark.parametrize("answer", ["label", "option"])
@pytest.mark.parametrize("share", [True, False], ids=["shared-prompt", "one-sequence-per-option"])
@pytest.mark.parametrize("removed", [(), (1, 3)])
def test_margin_matches_unbatched_reference(commonsense_file, removed, share, answer):
    model, tok = random_model("llama", n_layers=5), char_tokenizer()
    objective = make_objective("margin", "paper", n_items=10, max_len=512, share_prompt=share, answer=answer)
    scorer = Scorer(model, objective.prepare(tok, PAPER, batch_size=4), objective)
    items = load_choice_items(get_profile("paper").source("commonsense170k"), 10, seed=0, answer=answer)
    margins = []
    with torch.no_grad(), skip_layers(model, removed):
        for item in items:
            ell = [_mean_answer_logprob(model, tok, item.prompt, c) for c in item.choices]
            margins.append(sum(ell[item.gold] - e for j, e in enumerate(ell) if j != item.gold))
    expected = -sum(margins) / len(margins)
    assert abs(expected) > 1e-3  # the options differ, so the margin is informative
    # absolute: a margin is a difference of log-probs of size ~3, batched vs unbatched fp32
    assert scorer(removed) == pytest.approx(expected, abs=1e-7)


def test_shared_prompt_refused_beyond_a_sliding_window(commonsense_file):
    model, tok = random_model("qwen3", n_layers=4), char_tokenizer()  # sliding window of 16 tokens
    objective = make_objective("margin", "paper", n_items=4, max_len=512)
    with pytest.raises(ValueError, match="sliding window"):
        Scorer(model, objective.prepare(tok, PAPER, batch_size=4), objective)


def test_margin_refuses_to_truncate(commonsense_file):
    objective = make_objective("margin", "paper", n_items=5, max_len=20)
    with pytest.raises(ValueError, match="exceed max_len=20"):
        objective.prepare(char_tokenizer(), PAPER, batch_size=4)


def test_kl_is_zero_dense_and_matches_reference(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "c4.jsonl", random_text(20, 30, seed=4))
    monkeypatch.setenv("DEPTHPRUNE_DATA_C4_TRAIN", str(path))
    model, tok = random_model("qwen3", n_layers=5), char_tokenizer()
    objective = make_objective("kl", "paper", n_samples=6, seq_len=40)
    batches = objective.prepare(tok, PAPER, batch_size=4)
    scorer = Scorer(model, batches, objective)
    assert scorer.dense_loss == 0.0
    ids = torch.cat([b.input_ids for b in batches])
    with torch.no_grad():
        p = torch.log_softmax(model(ids).logits[:, :-1].float(), -1)
        with skip_layers(model, [2]):
            q = torch.log_softmax(model(ids).logits[:, :-1].float(), -1)
    expected = (p.exp() * (p - q)).sum(-1).mean().item()
    assert scorer({2}) == pytest.approx(expected, rel=1e-5)


def test_registry_errors():
    with pytest.raises(ValueError, match="allowed: kl, margin, ppl"):
        make_objective("bleu")
    with pytest.raises(ValueError, match="no parameter"):
        make_objective("ppl", n_items=3)
    assert make_objective("ppl", "tiny").seq_len == 128
    assert make_objective("ppl", "paper").n_samples == 128
