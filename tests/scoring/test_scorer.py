"""The scoring engine: the prefix cache changes cost, never the loss."""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

from depthprune.model.masking import skip_layers
from depthprune.objectives.base import Batch
from depthprune.objectives.ppl import PerplexityObjective
from depthprune.scoring.scorer import Scorer, boundary_key
from depthprune.search import get_searcher
from tests.fixtures import random_model


def _batches(n_batches=2, b=3, t=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [Batch(torch.randint(4, 30, (b, t), generator=g)) for _ in range(n_batches)]


def _reference_loss(model, batches, removed):
    """Independent ppl: the model's own logits and cross-entropy, full forward."""
    nll, count = 0.0, 0
    with torch.no_grad(), skip_layers(model, removed):
        for batch in batches:
            logits = model(batch.input_ids, use_cache=False).logits[:, :-1].float()
            targets = batch.input_ids[:, 1:]
            nll += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                                     reduction="sum").item()
            count += targets.numel()
    return nll / count


@pytest.mark.parametrize("arch", ["llama", "qwen3", "mistral"])
def test_cached_scores_equal_full_forward(arch):
    model = random_model(arch, n_layers=8)
    batches = _batches()
    cached = Scorer(model, batches, PerplexityObjective())
    plain = Scorer(model, batches, PerplexityObjective(), prefix_cache=False)
    rng = random.Random(0)
    sets = [frozenset(rng.sample(range(8), rng.randint(1, 4))) for _ in range(25)]
    for s in sets:
        assert cached(s) == plain(s), s
    assert cached.stats.resumed > 0
    for s in sets[:3]:
        assert cached(s) == pytest.approx(_reference_loss(model, batches, s), rel=1e-5)
    assert cached.stats.layer_forwards < plain.stats.layer_forwards


def test_memoised_and_counted():
    model = random_model("llama", n_layers=6)
    scorer = Scorer(model, _batches(), PerplexityObjective())
    assert scorer.stats.evaluations == 1  # the dense baseline
    first = scorer({2})
    forwards = scorer.stats.layer_forwards
    assert scorer({2}) == first and scorer.stats.layer_forwards == forwards
    assert scorer.stats.evaluations == 2
    assert scorer.many([{2}, {3}]) == [first, scorer({3})]


def test_greedy_same_answer_about_half_the_layer_forwards():
    model = random_model("llama", n_layers=12)
    batches = _batches()
    cached = Scorer(model, batches, PerplexityObjective())
    plain = Scorer(model, batches, PerplexityObjective(), prefix_cache=False)
    a = get_searcher("greedy").search(n_layers=12, budget=3, score=cached)
    b = get_searcher("greedy").search(n_layers=12, budget=3, score=plain)
    assert a.removed == b.removed and a.loss == b.loss
    ratio = cached.stats.layer_forwards / plain.stats.layer_forwards
    assert ratio <= 0.55, ratio


def test_cache_respects_byte_budget():
    model = random_model("llama", n_layers=8)
    batches = _batches()
    state_bytes = sum(b.input_ids.numel() for b in batches) * model.config.hidden_size * 4
    budget = 3 * state_bytes
    scorer = Scorer(model, batches, PerplexityObjective(), cache_bytes=budget)
    unbounded = Scorer(model, batches, PerplexityObjective(), prefix_cache=False)
    for s in itertools.combinations(range(8), 2):
        assert scorer(s) == unbounded(s)
    assert 0 < scorer.stats.peak_cache_bytes <= budget


def test_cache_keys_depend_only_on_the_prefix():
    assert boundary_key(3, {0, 5}) == boundary_key(3, {0, 4, 7}) == (3, frozenset({0}))


def test_self_check_turns_cache_off_when_resuming_is_wrong():
    model = random_model("llama", n_layers=6)
    # Stand-in for an architecture whose blocks depend on more than the hidden state
    # they receive (e.g. per-layer inputs indexed by call order): each block adds an
    # offset that counts the blocks already run in this forward. Resuming mid-way
    # changes the count, so resumed and full runs differ, and the self-check must see it.
    counter = {"n": 0}
    direction = torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(0))

    def reset(module, args, kwargs):
        counter["n"] = 0

    def offset(module, args):
        counter["n"] += 1
        return (args[0] + direction * counter["n"], *args[1:])

    model.model.register_forward_pre_hook(reset, with_kwargs=True)
    for layer in model.model.layers:
        layer.register_forward_pre_hook(offset)
    with pytest.warns(UserWarning, match="prefix cache disabled"):
        scorer = Scorer(model, _batches(), PerplexityObjective())
    assert scorer.prefix_cache is False
    plain = Scorer(model, _batches(), PerplexityObjective(), prefix_cache=False, verify=False)
    assert scorer({1, 4}) == plain({1, 4})


def test_gate_energy_is_exact_for_singles_and_predicts_pairs():
    model = random_model("llama", n_layers=6)
    scorer = Scorer(model, _batches(), PerplexityObjective())
    h, J = scorer.energy()
    assert len(h) == 6 and len(J) == 6 and all(J[i][i] == 0 for i in range(6))
    assert all(abs(J[i][j] - J[j][i]) < 1e-12 for i in range(6) for j in range(6))
    for i in range(6):
        assert h[i] == pytest.approx(scorer({i}) - scorer.dense_loss)
    # J is a model of pair interactions; it must at least beat assuming additivity.
    pairs = list(itertools.combinations(range(6), 2))
    err_quadratic = sum(abs(scorer.dense_loss + h[i] + h[j] + 2 * J[i][j] - scorer({i, j})) for i, j in pairs)
    err_additive = sum(abs(scorer.dense_loss + h[i] + h[j] - scorer({i, j})) for i, j in pairs)
    assert err_quadratic < err_additive
    assert scorer.stats.layer_backwards == 7 * 6


def test_fork_shares_dense_states_not_counters():
    model = random_model("llama", n_layers=6)
    scorer = Scorer(model, _batches(), PerplexityObjective())
    scorer({1})
    twin = scorer.fork(known={frozenset([1]): scorer({1})})
    assert twin.stats.evaluations == 0 and twin({1}) == scorer({1}) and twin.stats.layer_forwards == 0
    twin({4})
    assert twin.stats.layer_forwards == 1  # resumed from the shared dense state at block 4
    assert twin({4}) == Scorer(model, _batches(), PerplexityObjective(), prefix_cache=False)({4})


def test_without_a_dense_pass_every_set_runs_from_the_embeddings_to_the_same_loss():
    from depthprune.objectives.kl import KLObjective

    model, batches = random_model("llama", n_layers=6), _batches()
    full = Scorer(model, batches, PerplexityObjective())
    bare = Scorer(model, batches, PerplexityObjective(), dense_pass=False)
    assert bare.stats.evaluations == 0 and bare.stats.layer_forwards == 0 and math.isnan(bare.dense_loss)
    assert bare({4}) == full({4}) and bare.stats.layer_forwards == 5 and bare.stats.resumed == 0
    assert bare({0, 5}) == full({0, 5}) and bare.stats.layer_forwards == 5 + 4
    with pytest.raises(ValueError, match="cannot be forked"):
        bare.fork()
    with pytest.raises(ValueError, match="reference from the dense pass"):
        Scorer(model, batches, KLObjective(), dense_pass=False)


def test_block_influence_finds_a_block_made_identity_and_is_counted_once():
    """A block whose attention and MLP outputs are zeroed passes its input through: its Block
    Influence is 0 and ``bi`` removes it first; the pass costs one dense forward, once."""
    import math

    from depthprune.objectives.base import Batch
    from depthprune.objectives.ppl import PerplexityObjective
    from depthprune.scoring.scorer import Scorer, replay_cost
    from depthprune.search import get_searcher
    from tests.fixtures import random_model

    model = random_model("llama", n_layers=6)
    with torch.no_grad():
        model.model.layers[4].self_attn.o_proj.weight.zero_()
        model.model.layers[4].mlp.down_proj.weight.zero_()
    g = torch.Generator().manual_seed(0)
    scorer = Scorer(model, [Batch(torch.randint(4, 30, (3, 24), generator=g))], PerplexityObjective(), verify=False)
    bi = scorer.block_influence("cosine")
    assert abs(bi[4]) < 1e-6 and min(v for i, v in enumerate(bi) if i != 4) > 1e-4
    angular = scorer.block_influence("angular")
    assert all(abs(a - math.acos(max(-1.0, min(1.0, 1 - b))) / math.pi) < 1e-9 for a, b in zip(angular, bi))
    result = get_searcher("bi").search(n_layers=6, budget=1, score=scorer, seed=0)
    assert result.removed == (4,) and result.evaluations == 1
    replay = replay_cost(scorer.requests, scorer.memo, 6)
    assert replay.layer_forwards == scorer.stats.layer_forwards  # dense 6 + influence 6 (once) + the set


def _saved_by_backward(fn):
    """What autograd keeps for the backward while ``fn`` runs, as (result, [shape, ...]).
    (A checkpointed region keeps its inputs by itself: they are not listed.)"""
    shapes = []

    def pack(t):
        shapes.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        return fn(), shapes


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_gate_gradients_recompute_blocks_in_backward_and_keep_their_value(arch):
    """cbo's gradient passes checkpoint every block: the backward keeps far less, the gradient
    is the same numbers (the recomputation runs the same kernels on the same inputs)."""
    from depthprune.scoring.calibration import CalibrationData
    from depthprune.scoring.gates import gate_gradient, reduce_weights

    model = random_model(arch, n_layers=6)
    data = CalibrationData.build(model, _batches(t=48), PerplexityObjective())
    weights = reduce_weights(data)
    g_on, kept_on = _saved_by_backward(lambda: gate_gradient(data, frozenset([2]), weights))
    g_off, kept_off = _saved_by_backward(lambda: gate_gradient(data, frozenset([2]), weights, recompute=False))
    assert torch.equal(g_on, g_off)
    size = lambda shapes: sum(math.prod(s) for s in shapes)  # noqa: E731
    assert size(kept_on) < size(kept_off) / 3, (size(kept_on), size(kept_off))
    assert all("forward" not in vars(layer) for layer in data.decoder.layers), "blocks restored"


def test_energy_recomputes_the_blocks_only_past_its_memory_limit(monkeypatch):
    """cbo's energy runs its gradient passes without recomputation while a micro-batch keeps less than its limit,
    and falls back to recomputing as soon as one keeps more: the same (h, J) either way, to the bit."""
    from depthprune.scoring import gates
    from depthprune.scoring.calibration import CalibrationData

    model = random_model("llama", n_layers=4)
    data = CalibrationData.build(model, _batches(t=32), PerplexityObjective())
    h = [0.1, 0.2, 0.3, 0.4]
    calls: list[tuple[bool, bool]] = []  # (recompute, raised) per gradient pass
    original = gates.gate_gradient

    def recorded(*args, **kwargs):
        try:
            grad = original(*args, **kwargs)
        except gates.KeepsTooMuch:
            calls.append((kwargs.get("recompute", True), True))
            raise
        calls.append((kwargs.get("recompute", True), False))
        return grad

    monkeypatch.setattr(gates, "gate_gradient", recorded)
    roomy = gates.quadratic_energy(data, h, limit=1 << 40)
    assert calls == [(False, False)] * 5
    calls.clear()
    short = gates.quadratic_energy(data, h, limit=4096)
    assert calls == [(False, True)] + [(True, False)] * 5
    assert roomy == short


def test_output_head_keeps_no_logits_for_the_backward():
    """With gradients flowing, the head's chunks are recomputed in the backward: nothing of the
    vocabulary's width is kept; the log-probabilities and their gradient are unchanged."""
    from depthprune.model.output_head import OutputHead

    model = random_model("llama", n_layers=2)
    head = OutputHead(model, chunk_tokens=16)
    vocab = model.config.vocab_size
    hidden = torch.randn(40, model.config.hidden_size, requires_grad=True)
    targets = torch.randint(0, vocab, (40,))
    lp, kept = _saved_by_backward(lambda: head.target_logprobs(hidden, targets))
    assert all(vocab not in s for s in kept), kept
    (grad,) = torch.autograd.grad(lp.sum(), hidden)
    plain = torch.log_softmax(model.lm_head(hidden).float(), -1).gather(-1, targets[:, None]).squeeze(-1)
    (grad_plain,) = torch.autograd.grad(plain.sum(), hidden)
    torch.testing.assert_close(lp, plain)
    torch.testing.assert_close(grad, grad_plain)
    with torch.no_grad():
        assert torch.equal(head.target_logprobs(hidden, targets), lp.detach())


def test_head_chunks_under_gradients_are_capped_in_bytes(monkeypatch):
    """With gradients flowing, a head chunk holds at most GRAD_CHUNK_BYTES of float32 logits (its
    backward keeps several of them at once); without gradients the chunks stay ``chunk_tokens``.
    The log-probabilities and their gradient do not depend on the split."""
    from depthprune.model import output_head as base

    model = random_model("llama", n_layers=2)
    vocab = model.config.vocab_size
    head = base.OutputHead(model, chunk_tokens=64)
    hidden = torch.randn(40, model.config.hidden_size, requires_grad=True)
    targets = torch.randint(0, vocab, (40,))
    (whole_grad,) = torch.autograd.grad(head.target_logprobs(hidden, targets).sum(), hidden)
    assert head.grad_chunk_tokens() == 64  # this vocabulary's rows fit the default budget
    monkeypatch.setattr(base, "GRAD_CHUNK_BYTES", 7 * 4 * vocab + 5)
    assert head.grad_chunk_tokens() == 7
    rows = []
    original = head._chunk_logprobs
    monkeypatch.setattr(head, "_chunk_logprobs", lambda h, r, t: rows.append(h.shape[0]) or original(h, r, t))
    lp = head.target_logprobs(hidden, targets)
    assert rows == [7] * 5 + [5], rows
    (grad,) = torch.autograd.grad(lp.sum(), hidden)
    torch.testing.assert_close(grad, whole_grad)
    rows.clear()
    with torch.no_grad():
        torch.testing.assert_close(head.target_logprobs(hidden, targets), lp.detach())
    assert rows == [40], rows


def test_kl_keeps_no_distributions_for_the_backward():
    """The kl objective's head loop is checkpointed like the head's: under gradients nothing of the
    vocabulary's width is kept, and the value and gradient are those of the plain formula."""
    from depthprune.model.output_head import OutputHead
    from depthprune.objectives.base import Batch
    from depthprune.objectives.kl import KLObjective

    model = random_model("llama", n_layers=2)
    head = OutputHead(model, chunk_tokens=16)
    vocab, width = model.config.vocab_size, model.config.hidden_size
    reference = torch.randn(2, 21, width)
    hidden = torch.randn(2, 21, width, requires_grad=True)
    objective, batch = KLObjective(), Batch(torch.zeros(2, 21, dtype=torch.long))
    objective.set_reference(0, reference, batch, head)
    stats, kept = _saved_by_backward(lambda: objective.batch_stats(hidden, batch, head))
    assert all(vocab not in s for s in kept), kept
    (grad,) = torch.autograd.grad(stats[0], hidden)
    lp = torch.log_softmax(model.lm_head(hidden[:, :-1]).float(), -1)
    lq = torch.log_softmax(model.lm_head(reference[:, :-1]).float(), -1)
    plain = (lq.exp() * (lq - lp)).sum().double()
    (grad_plain,) = torch.autograd.grad(plain, hidden)
    assert stats[1].item() == 40
    torch.testing.assert_close(stats[0], plain)
    torch.testing.assert_close(grad, grad_plain)
    with torch.no_grad():
        assert torch.equal(objective.batch_stats(hidden, batch, head), stats.detach())


def test_shared_boundaries_are_the_deepest_an_earlier_set_passes():
    from depthprune.scoring.state_cache import shared_boundaries

    order = [frozenset(s) for s in ([2, 5, 9], [2, 5, 11], [2, 6], [2, 6, 8], [2, 6, 9], [3], [4, 7])]
    assert shared_boundaries(order, 12) == [
        None,  # the first: from the dense state entering block 2
        boundary_key(9, {2, 5}),  # agrees with [2, 5, 9] below 9: block 8's output
        boundary_key(5, {2}),  # parts from both at block 5, which [2, 5, ...] skip: block 4's output
        boundary_key(8, {2, 6}),  # [2, 6] passes block 8's input
        boundary_key(9, {2, 6}),  # [2, 6] (not its neighbour [2, 6, 8]) passes block 9's input
        None, None,  # nothing deeper than the dense state entering 3, 4
    ]


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_prefetch_same_bits_as_one_call_each_fewer_blocks(arch):
    model = random_model(arch, n_layers=10)
    batches = _batches()
    rng = random.Random(1)
    sets = [frozenset(rng.sample(range(10), rng.randint(2, 5))) for _ in range(30)]
    sets += [frozenset({1, 5, 7}), frozenset({1, 5, 8}), frozenset({1, 6}), frozenset({1, 6, 9})]  # shared prefixes
    single = Scorer(model, batches, PerplexityObjective(), spare_states=False)  # one call each, the kept best only
    ahead = Scorer(model, batches, PerplexityObjective())
    base_bytes = ahead.cache.bytes
    ahead.prefetch(sets)
    assert ahead.requests == [] and ahead.cache.bytes == base_bytes  # nothing logged, every lent state back
    forwards = ahead.stats.layer_forwards
    assert ahead.many(sets) == [single(s) for s in sets]  # exact: the same bits
    assert ahead.stats.layer_forwards == forwards  # answered from the memo
    assert ahead.requests == single.requests and ahead.stats.evaluations == single.stats.evaluations
    assert forwards < single.stats.layer_forwards
    # the walk runs each block of the sets' prefix tree once: the union of their paths from the dense states
    tree = {(k, frozenset(i for i in s if i < k)) for s in set(sets) for k in range(min(s), 10) if k not in s}
    assert forwards - 10 == len(tree)  # less the dense pass
    # a byte budget with no room to hand states on: the same losses, from shallower states
    tight = Scorer(model, batches, PerplexityObjective(), cache_bytes=ahead.cache.bytes)
    tight.prefetch(sets)
    assert tight.many(sets) == [single(s) for s in sets] and tight.cache.bytes <= ahead.cache.bytes
    assert tight.stats.layer_forwards > forwards
