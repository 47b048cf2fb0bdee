"""The output head's shared-state path (depthprune.model.output_head.OutputHead.target_logprobs with ``rows``): a
state several targets read from goes through the head once, and every target gets the log-probability the
per-target path gives it, in the targets' own order, across chunks and row slices."""

from __future__ import annotations

import pytest
import torch

from depthprune.model import output_head
from depthprune.model.output_head import OutputHead
from tests.fixtures import random_model


def _rows_are_independent(head: OutputHead, hidden: torch.Tensor, rows: torch.Tensor) -> bool:
    """Whether this machine's product gives a state the same bits alone as beside other states: where it does
    not, no reordering of the head's rows can be bit-identical, and the comparison below is to rounding."""
    with torch.no_grad():
        return torch.equal(head._product(hidden)[rows], head._product(hidden[rows]))


@pytest.fixture
def case():
    torch.manual_seed(0)
    model = random_model("llama", n_layers=2)
    states = torch.randn(37, model.config.hidden_size)
    # every state read by 1-4 targets, the targets in no particular order (as options after a shared prompt)
    rows = torch.cat([torch.full((1 + i % 4,), i) for i in range(37)])
    rows = rows[torch.randperm(len(rows))]
    targets = torch.randint(0, model.config.vocab_size, rows.shape)
    return model, states, rows, targets


@pytest.mark.parametrize("chunk_tokens", [2048, 8])  # one chunk; many, some reading no target
def test_shared_states_give_each_target_its_per_target_log_probability(case, chunk_tokens, monkeypatch):
    model, states, rows, targets = case
    monkeypatch.setattr(output_head, "ROW_SLICE_BYTES", 3 * 4 * model.config.vocab_size)  # slices of 3 rows
    head = OutputHead(model, chunk_tokens=chunk_tokens)
    with torch.no_grad():
        apart = head.target_logprobs(states[rows], targets)
        shared = head.target_logprobs(states, targets, rows=rows)
    assert shared.shape == apart.shape == rows.shape
    # in one chunk the two paths multiply the same states, once or once per target: the same bits wherever a
    # product row does not depend on the rows beside it; in chunks of 8 they multiply other groups of rows,
    # whose bits a BLAS may choose differently for so few rows (MKL on an AMD EPYC does): the same to rounding
    if chunk_tokens >= len(rows) and _rows_are_independent(head, states, rows):
        assert torch.equal(shared, apart)
    else:
        torch.testing.assert_close(shared, apart, rtol=1e-6, atol=1e-5)


def test_gradients_flow_through_shared_states(case):
    model, states, rows, targets = case
    head = OutputHead(model, chunk_tokens=8)
    a, b = states.clone().requires_grad_(True), states.clone().requires_grad_(True)
    head.target_logprobs(a[rows], targets).sum().backward()
    head.target_logprobs(b, targets, rows=rows).sum().backward()
    torch.testing.assert_close(b.grad, a.grad, rtol=1e-5, atol=1e-6)  # the same sum, in another order


def test_rows_and_targets_must_pair_up(case):
    model, states, rows, targets = case
    with pytest.raises(ValueError, match="must pair up"):
        OutputHead(model).target_logprobs(states, targets[:-1], rows=rows)


def test_the_margin_reads_each_shared_state_once_with_the_per_target_bits():
    """The margin objective on a shipped tiny model: its option log-probabilities equal the per-target
    expression it used before, and its options' first tokens share their prompt's state."""
    from depthprune.data.profiles import TINY
    from depthprune.model import load_model
    from depthprune.objectives import make_objective

    model, tok = load_model("tiny-qwen3", device="cpu", dtype="float32")
    objective = make_objective("margin", TINY, n_items=16)
    batch = objective.prepare(tok, TINY, batch_size=16)[0]
    head, p = OutputHead(model), batch.payload
    with torch.no_grad():
        hidden = model.model(**batch.model_inputs("cpu")).last_hidden_state
        got = objective.option_logprobs(hidden, batch, head)
        logp = head.target_logprobs(hidden[p["rows"], p["cols"]], p["targets"]).double()
    sums = torch.zeros(len(p["weights"]), dtype=torch.float64).index_add(0, p["option"], logp)
    want = sums / torch.zeros_like(sums).index_add(0, p["option"], torch.ones_like(logp))
    states = torch.unique(p["rows"] * hidden.shape[1] + p["cols"])
    assert len(states) < len(p["rows"])  # the options' first tokens share a state
    flat = hidden.reshape(-1, hidden.shape[-1])
    if _rows_are_independent(head, flat, states):
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-6)
