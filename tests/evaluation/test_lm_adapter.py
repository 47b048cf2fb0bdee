"""The shared-prefix lm-eval model against stock HFLM: same requests, same answers.

Mechanism tests on a random model (hand-made token requests: shared contexts, one-token
continuations, duplicates, an input that is a prefix of another, left truncation, a
sliding window, rolling windows, the output head in chunks, the start-up check), then the
cross-check on the shipped tiny-llama3: the tiny profile's tasks through lm-eval, dense and
pruned, every metric, every per-item outcome and every request's log-likelihood.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM

from depthprune.evaluation.evaluate import item_outcomes, lm_eval_model, lm_eval_tasks, run_lm_eval
from depthprune.evaluation.lm_adapter import SharedPrefixLM, _Item, plan_rows
from depthprune.model.masking import skip_layers
from tests.fixtures import char_tokenizer, random_model

LOGPROB_TOL = 1e-4  # float32, absolute


def _pair(model, max_length: int = 64, **kwargs):
    tok = char_tokenizer()
    stock = HFLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=max_length)
    mine = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=max_length, **kwargs)
    return stock, mine


def _greedy_continuation(model, ctx: list[int], n: int) -> list[int]:
    ids = list(ctx)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids]), use_cache=False).logits[0, -1].argmax()))
    return ids[len(ctx):]


def _requests(model) -> list:
    g = torch.Generator().manual_seed(1)

    def toks(n: int) -> list[int]:
        return torch.randint(4, 34, (n,), generator=g).tolist()

    shared, other, long_ctx = [1, *toks(11)], [1, *toks(7)], [1, *toks(40)]
    conts = [toks(3), toks(5), toks(1), toks(1), toks(4)]
    reqs = [(("a", str(k)), shared, c) for k, c in enumerate(conts)]  # one context, five continuations
    reqs.append((("a", "dup"), shared, conts[1]))  # a duplicate request
    reqs.append((("a", "greedy"), shared, _greedy_continuation(model, shared, 3)))  # is_greedy must be True
    reqs += [(("b", "x"), other, toks(2)), (("b", "y"), other, toks(6))]
    reqs.append((("c", "prefix"), shared + conts[0][:2], toks(2)))  # its input is a prefix of another's
    reqs += [(("d", "trunc"), long_ctx, toks(9)), (("d", "trunc2"), long_ctx, toks(3))]  # left-truncated
    reqs.append((None, [1], toks(8)))  # a rolling-style window: one-token context, no cache key
    return reqs


@pytest.mark.parametrize("removed", [(), (1, 3)], ids=["dense", "view-1,3"])
def test_token_requests_equal_stock_hflm(removed):
    model = random_model("llama", n_layers=5)
    with skip_layers(model, removed):
        stock, mine = _pair(model, max_length=32)  # the 41-token context is truncated from the left
        reqs = _requests(model)
        expected = stock._loglikelihood_tokens(reqs, disable_tqdm=True)
        got = mine._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert len(got) == len(reqs)
    for (lp_a, greedy_a), (lp_b, greedy_b), req in zip(expected, got, reqs, strict=True):
        assert abs(lp_a - lp_b) <= LOGPROB_TOL, (req[0], lp_a, lp_b)
        assert greedy_a == greedy_b, req[0]
    assert got[6][1] and not all(g for _, g in got)  # the greedy continuation is recognised, others are not
    assert got[5] == got[1]  # duplicates are scored once
    stats = mine.stats
    assert stats.check == "passed" and stats.delegated == 0 and stats.distinct == len(reqs) - 1
    assert stats.tokens < stats.stock_tokens  # the shared contexts ran once


def test_encodings_are_lm_evals_own_remembered_across_adapters_and_each_callers_own(monkeypatch):
    model = random_model("llama", n_layers=2)
    tok = char_tokenizer()
    stock = HFLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=64)
    calls = [(s, {}) for s in ("a b", "abc", "<bos>ab", " ")] + [("abcdef", {"left_truncate_len": 3}),
                                                                  ("abc", {"add_special_tokens": False})]
    expected = [stock.tok_encode(s, **kw) for s, kw in calls]
    first = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=64)
    assert [first.tok_encode(s, **kw) for s, kw in calls] == expected
    encoded = []
    real_encode = tok.encode
    monkeypatch.setattr(tok, "encode", lambda *a, **k: encoded.append(a) or real_encode(*a, **k))
    second = SharedPrefixLM(pretrained=model, tokenizer=tok, batch_size=4, max_length=64)  # the next evaluation
    assert [second.tok_encode(s, **kw) for s, kw in calls] == expected
    assert encoded == []  # remembered: the tokenizer was not asked again
    mine = second.tok_encode("abc")
    mine.append(99)  # a caller's list is its own
    assert second.tok_encode("abc") == expected[1]
    tok.add_tokens(["ab"])  # another vocabulary: encoded afresh, as lm-eval itself does
    assert second.tok_encode("abc") == HFLM.tok_encode(second, "abc") != expected[1]
    assert encoded != []


def test_dense_states_are_reused_below_the_first_removed_block_with_the_same_answers():
    """Evaluate removal sets one after another on one model: the later ones start from the stored
    dense states where they may, and every answer equals a full forward's (bit for bit)."""
    from depthprune.evaluation.lm_adapter import DenseStates

    model = random_model("llama", n_layers=6)
    reqs = _requests(model)
    store = DenseStates()
    runs = {}
    for removed in [(4,), (), (2, 5), (0, 3), (3,)]:
        first = min(removed) if removed else 6
        with skip_layers(model, removed):
            _, plain = _pair(model, max_length=32)
            _, reusing = _pair(model, max_length=32, dense_blocks=first, dense_store=store)
            expected = plain._loglikelihood_tokens(reqs, disable_tqdm=True)
            got = reusing._loglikelihood_tokens(reqs, disable_tqdm=True)
        assert got == expected, removed  # exactly: the same kernels on the same inputs
        runs[removed] = reusing.stats
    assert store.usable is True
    assert runs[(4,)].reused_block_tokens == 0  # nothing stored yet: this run stores boundaries 1..4

    def share(stats):  # the fraction of block x token computations replaced by stored states
        return stats.reused_block_tokens / (stats.reused_block_tokens + stats.block_tokens)

    assert share(runs[()]) == 4 / 6  # starts at boundary 4 (the deepest stored), then stores 5
    assert runs[(0, 3)].reused_block_tokens == 0  # block 0 removed: no dense prefix
    assert share(runs[(3,)]) == 3 / 5 and share(runs[(2, 5)]) == 2 / 4


def test_dense_states_are_not_used_when_the_embeddings_do_not_reach_the_first_block_as_they_are():
    """A model that transforms the embeddings inside its forward (here: x2 before block 0) would
    transform a state fed where the embeddings go once more: the first stored batch detects it
    and nothing is ever reused. (Gemma's scale lives in its embedding module: reuse is valid there.)"""
    from depthprune.evaluation.lm_adapter import DenseStates

    scaled = random_model("llama", n_layers=4)
    inner, forward = scaled.model, scaled.model.forward

    def scaling_forward(input_ids=None, inputs_embeds=None, **kwargs):
        embeds = inner.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        return forward(inputs_embeds=embeds * 2.0, **kwargs)

    inner.forward = scaling_forward
    for m, usable in ((random_model("llama", n_layers=4), True), (scaled, False)):
        store = DenseStates()
        reqs = _requests(m)
        for removed in [(3,), (2,)]:
            with skip_layers(m, removed):
                _, plain = _pair(m, max_length=32)
                _, reusing = _pair(m, max_length=32, dense_blocks=min(removed), dense_store=store)
                assert reusing._loglikelihood_tokens(reqs, disable_tqdm=True) == \
                    plain._loglikelihood_tokens(reqs, disable_tqdm=True)
        assert store.usable is usable and (store.bytes > 0) is usable
        assert (reusing.stats.reused_block_tokens > 0) is usable


def test_plan_shares_contexts_but_not_a_lone_first_token():
    same = [_Item((1, 5, 6, 7, 8, 9, 10, 11, 12) + tail, (tail[-1],)) for tail in ((20, 21), (22, 23), (24,))]
    unrelated = [_Item((1, *range(40, 80)), (3,)), _Item((1, *range(80, 120)), (3,))]
    rows = plan_rows(same + unrelated, cap=1024, token_cost=1000.0, pair_cost=10.0)
    by_size = sorted(len(r.items) for r in rows)
    assert by_size == [1, 1, 3]  # one row for the shared context; unrelated inputs sharing BOS stay apart
    (shared,) = [r for r in rows if len(r.items) == 3]
    assert shared.prefix == 9 and shared.width == 9 + 2 + 2 + 1 and not shared.plain
    assert all(r.plain for r in rows if len(r.items) == 1)
    # a cap narrower than the packed row keeps the options apart
    assert sorted(len(r.items) for r in plan_rows(same, cap=11, token_cost=1000.0)) == [1, 1, 1]


def test_sliding_window_requests_go_to_stock():
    model = random_model("mistral", n_layers=3)  # sliding_window=16: a custom mask would attend further
    stock, mine = _pair(model)
    reqs = _requests(model)
    expected = stock._loglikelihood_tokens(reqs, disable_tqdm=True)
    got = mine._loglikelihood_tokens(reqs, disable_tqdm=True)
    for (lp_a, greedy_a), (lp_b, greedy_b) in zip(expected, got, strict=True):
        assert abs(lp_a - lp_b) <= LOGPROB_TOL and greedy_a == greedy_b
    long = sum(1 for _, c, t in reqs if len(c) + len(t) - 1 > 16)
    assert long and mine.stats.delegated == long and mine.stats.requests == len(reqs) - long


def test_rolling_loglikelihood_equals_stock():
    model = random_model("llama", n_layers=3)
    stock, mine = _pair(model, max_length=16)  # several rolling windows per string
    texts = ["the quick brown fox jumps over the lazy dog. " * 2, "a b c d e f g h", "xyz"]
    reqs = [Instance("loglikelihood_rolling", {}, (t,), i) for i, t in enumerate(texts)]
    expected = stock.loglikelihood_rolling(reqs, disable_tqdm=True)
    got = mine.loglikelihood_rolling(reqs, disable_tqdm=True)
    assert all(abs(a - b) <= LOGPROB_TOL for a, b in zip(expected, got, strict=True)), (expected, got)
    assert mine.stats.requests > len(texts)  # the windows came through the packed path


def test_output_head_runs_in_chunks():
    """The largest logits tensor is chunk x vocabulary; stock HFLM's is batch x length x vocabulary."""
    model = random_model("llama", n_layers=2)
    stock, mine = _pair(model, head_chunk_tokens=4, verify=False)
    reqs = _requests(model)
    shapes: list[tuple[int, ...]] = []
    handle = model.get_output_embeddings().register_forward_hook(lambda m, a, out: shapes.append(tuple(out.shape)))
    try:
        mine._loglikelihood_tokens(reqs, disable_tqdm=True)
        ours = list(shapes)
        shapes.clear()
        stock._loglikelihood_tokens(reqs, disable_tqdm=True)
    finally:
        handle.remove()
    vocab = model.config.vocab_size
    assert ours and all(len(s) == 2 and s[0] <= 4 and s[1] == vocab for s in ours), ours
    assert sum(s[0] for s in ours) == mine.stats.scored
    assert max(math.prod(s) for s in shapes) > 4 * vocab  # what the hook sees without chunking


def test_start_up_check_falls_back_to_stock(monkeypatch):
    model = random_model("llama", n_layers=2)
    stock, mine = _pair(model)
    real = SharedPrefixLM._target_logprobs

    def broken(head, hidden, targets):  # a packing that is off by a little
        lp, greedy = real(head, hidden, targets)
        return lp + 1e-2, greedy

    monkeypatch.setattr(SharedPrefixLM, "_target_logprobs", staticmethod(broken))
    reqs = _requests(model)
    with pytest.warns(UserWarning, match="falling back to stock HFLM"):
        got = mine._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert got == stock._loglikelihood_tokens(reqs, disable_tqdm=True)
    assert mine.stats.check == "failed" and mine.stats.delegated == len(reqs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mine._loglikelihood_tokens(reqs, disable_tqdm=True) == got  # stays on stock, no second check
    assert mine.stats.delegated == 2 * len(reqs)


# -- the cross-check on the tiny model ------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_session():
    from depthprune.recipe import Session

    # float32: the adapter is checked to *equal* stock HFLM, which holds where both are exact. In
    # bf16 stock HFLM takes its log-softmax of bf16-rounded logits, ours of float32 ones (by design).
    return Session.open("tiny-llama3", dtype="float32")


def _responses(samples: list[dict]) -> list[tuple[float, bool]]:
    out = []
    for sample in sorted(samples, key=lambda s: s["doc_id"]):
        out += [tuple(r[0]) for r in sample["resps"]]
    return out


@pytest.mark.parametrize("removed", [(), (3, 7, 11)], ids=["dense", "pruned-3,7,11"])
def test_cross_check_against_stock_hflm_on_tiny_llama3(tiny_session, removed):
    s = tiny_session
    cfg = s.profile.eval_config(limit=12)
    cfg_stock = s.profile.eval_config(limit=12, adapter="hflm")
    assert cfg.adapter == "shared-prefix"  # the default this test licenses
    with skip_layers(s.model, removed):
        stock = run_lm_eval(lm_eval_model(s.model, s.tokenizer, cfg_stock), s.profile, cfg_stock)
        lm = lm_eval_model(s.model, s.tokenizer, cfg)
        mine = run_lm_eval(lm, s.profile, cfg)
    assert isinstance(lm, SharedPrefixLM) and lm.stats.check == "passed" and lm.stats.delegated == 0
    assert lm.stats.tokens < lm.stats.stock_tokens  # contexts were shared
    names = lm_eval_tasks(s.profile, cfg)
    assert len(names) == 7
    for name in names:
        a, b = stock["results"][name], mine["results"][name]
        numeric = {k for k, v in a.items() if isinstance(v, float)}
        assert numeric and numeric == {k for k, v in b.items() if isinstance(v, float)}
        for key in numeric:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (name, key)
        assert item_outcomes(mine["samples"][name]) == item_outcomes(stock["samples"][name]), name
        ra, rb = _responses(stock["samples"][name]), _responses(mine["samples"][name])
        assert len(ra) == len(rb) > 0
        assert [g for _, g in ra] == [g for _, g in rb], name
        assert max(abs(x - y) for (x, _), (y, _) in zip(ra, rb, strict=True)) <= LOGPROB_TOL, name
