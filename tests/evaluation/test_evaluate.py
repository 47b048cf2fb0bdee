"""Evaluation: in-memory view == physically pruned model; cached by removal set."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from depthprune.data.profiles import TINY
from depthprune.evaluation.evaluate import evaluate, windows_perplexity
from depthprune.model.masking import prune_layers
from tests.fixtures import char_tokenizer, random_model

CFG = TINY.eval_config(tasks=("hellaswag", "boolq"), limit=12, c4_windows=4, seq_len=64)


def test_windows_perplexity_is_token_weighted():
    model = random_model("llama", n_layers=2)
    windows = torch.randint(4, 30, (3, 16), generator=torch.Generator().manual_seed(0))
    ppl, tokens = windows_perplexity(model, windows, batch_size=2)
    with torch.no_grad():
        logits = model(windows).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
    assert tokens == 3 * 15 and ppl == pytest.approx(math.exp(nll.item()), rel=1e-5)


def test_per_window_nll_is_each_windows_mean_and_averages_to_log_perplexity():
    model = random_model("llama", n_layers=2)
    windows = torch.randint(4, 30, (3, 16), generator=torch.Generator().manual_seed(0))
    per_window: list[float] = []
    ppl, _ = windows_perplexity(model, windows, batch_size=2, window_nll=per_window)
    with torch.no_grad():
        logits = model(windows).logits[:, :-1]
    each = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none").mean(1)
    assert per_window == pytest.approx(each.tolist(), rel=1e-5)
    assert math.log(ppl) == pytest.approx(sum(per_window) / 3, rel=1e-6)


def test_view_equals_pruned_copy_and_is_cached(tmp_path):
    model, tok = random_model("llama", n_layers=4), char_tokenizer()
    viewed = evaluate(model, tok, "random-llama", [1], TINY, CFG, cache_dir=tmp_path)
    pruned = prune_layers(copy.deepcopy(model), [1])
    direct = evaluate(pruned, tok, "random-llama-pruned", [], TINY, CFG)
    assert set(viewed.metrics) >= {"wikitext2_ppl", "c4_ppl", "lambada_acc", "lambada_ppl", "hellaswag_acc_norm",
                                   "boolq_acc", "avg_acc"}
    for key, value in viewed.metrics.items():
        assert direct.metrics[key] == pytest.approx(value, rel=1e-6), key
    assert viewed.metrics["avg_acc"] == pytest.approx(
        (viewed.metrics["hellaswag_acc_norm"] + viewed.metrics["boolq_acc"]) / 2)
    assert viewed.protocol["zero_shot"]["lm_eval_version"]
    adapter = viewed.protocol["zero_shot"]["adapter"]
    assert adapter["name"] == "shared-prefix" and adapter["delegated"] == 0 and adapter["tokens"] > 0
    assert viewed.protocol["perplexity"]["wikitext2"]["joiner"] == "\n\n"
    # per-item outcomes: one character per item, their mean is lm-eval's own metric
    for task in ("hellaswag", "boolq", "lambada"):
        outcomes = viewed.items[task]["acc"]
        assert len(outcomes) == 12 and set(outcomes) <= {"0", "1"}
        assert outcomes.count("1") / len(outcomes) == pytest.approx(viewed.metrics[f"{task}_acc"])
    assert viewed.items["hellaswag"]["acc_norm"].count("1") / 12 == pytest.approx(viewed.metrics["hellaswag_acc_norm"])
    # per-window outcomes: their mean is the log of the perplexity reported
    for name in ("wikitext2", "c4"):
        assert math.log(viewed.metrics[f"{name}_ppl"]) == pytest.approx(
            sum(viewed.windows[name]) / len(viewed.windows[name]), rel=1e-6)
    assert len(viewed.windows["c4"]) == 4
    again = evaluate(model, tok, "random-llama", [1], TINY, CFG, cache_dir=tmp_path)
    assert again.cached and again.metrics == viewed.metrics and again.items == viewed.items
    assert again.windows == viewed.windows and again.clusters == viewed.clusters
    (entry,) = tmp_path.iterdir()
    entry.write_text("{ truncated")
    redone = evaluate(model, tok, "random-llama", [1], TINY, CFG, cache_dir=tmp_path)
    assert not redone.cached and redone.metrics == viewed.metrics
    assert json.loads(entry.read_text())["removed"] == [1]


def test_windows_perplexity_runs_the_head_in_chunks():
    """Same perplexity in chunks of 1, 7 and all tokens; no logits larger than a chunk are made."""
    model = random_model("llama", n_layers=2)
    windows = torch.randint(4, 30, (5, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(windows).logits[:, :-1]
    reference = math.exp(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                           windows[:, 1:].reshape(-1)).item())
    vocab = model.config.vocab_size
    for chunk in (1, 7, 10_000):
        rows: list[int] = []
        hook = model.get_output_embeddings().register_forward_hook(
            lambda m, a, out, rows=rows: rows.append(out.numel() // vocab))
        try:
            ppl, tokens = windows_perplexity(model, windows, batch_size=4, chunk_tokens=chunk)
        finally:
            hook.remove()
        assert tokens == 5 * 23 and ppl == pytest.approx(reference, rel=1e-5)
        # one call by the start-up check (its first min(64, chunk) tokens, twice), then chunks only
        assert max(rows[2:]) == min(chunk, 4 * 23) and max(rows[:2]) <= min(chunk, 64)


def test_windows_perplexity_falls_back_where_the_head_differs(monkeypatch):
    from depthprune.model.output_head import OutputHead

    model = random_model("llama", n_layers=2)
    windows = torch.randint(4, 30, (3, 16), generator=torch.Generator().manual_seed(2))
    expected, _ = windows_perplexity(model, windows, batch_size=2)
    real = OutputHead.logits
    monkeypatch.setattr(OutputHead, "logits", lambda self, hidden: real(self, hidden) + 1.0)  # not the model's
    with pytest.warns(UserWarning, match="uses full logits"):
        ppl, _ = windows_perplexity(model, windows, batch_size=2)
    assert ppl == pytest.approx(expected, rel=1e-5)


def test_unknown_adapter():
    with pytest.raises(ValueError, match="allowed: shared-prefix, hflm"):
        TINY.eval_config(adapter="vllm")


def test_unknown_task():
    with pytest.raises(ValueError, match="allowed: hellaswag"):
        TINY.eval_config(tasks=("mmlu",))


def test_windows_perplexity_from_stored_dense_states_is_exact():
    """Removal sets evaluated one after another on the same windows: from the second on, the
    blocks below the first removed one come from the store, and every perplexity is unchanged."""
    from depthprune.model.masking import skip_layers
    from depthprune.scoring.dense_states import DenseStates, forward_from_dense

    model = random_model("llama", n_layers=6)
    windows = torch.randint(4, 34, (6, 24), generator=torch.Generator().manual_seed(0))
    store, reused = DenseStates(), []
    for removed in [(4,), (2, 5), (), (3,)]:
        first = min(removed) if removed else 6
        with skip_layers(model, removed), torch.no_grad():
            plain = windows_perplexity(model, windows, batch_size=4)
            hidden, _, taken = forward_from_dense(model, {"input_ids": windows[:4]}, first, store)
            full, _, _ = forward_from_dense(model, {"input_ids": windows[:4]}, 0, None)
            assert torch.equal(hidden, full), removed
            assert windows_perplexity(model, windows, batch_size=4, dense_blocks=first) == plain, removed
        reused.append(taken)
    assert reused[0] == 0 and all(r > 0 for r in reused[1:]) and store.usable


def test_item_clusters_number_each_docs_cluster_in_doc_order():
    from depthprune.evaluation.evaluate import item_clusters

    samples = [{"doc_id": 2, "doc": {"cluster": "b"}}, {"doc_id": 0, "doc": {"cluster": "a"}},
               {"doc_id": 1, "doc": {"cluster": "b"}}]
    assert item_clusters(samples) == [0, 1, 1]
    assert item_clusters([{"doc_id": 0, "doc": {"query": "x"}}]) is None  # no cluster: every item its own
