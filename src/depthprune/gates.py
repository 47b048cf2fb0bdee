"""Per-block gates and the quadratic energy that ``cbo`` minimises.

A gate g_i scales block i's residual update: h_{i+1} = h_i + g_i (block_i(h_i) − h_i).
g_i = 1 is the dense model, g_i = 0 removes the block exactly. With the removal vector
x = 1 − g, the loss f(x) is modelled as a quadratic on binary x (x_i² = x_i, so the
diagonal folds into the linear term):

    f(x) ≈ f(0) + h·x + xᵀ J x,     J symmetric, zero diagonal.

h is *exact*: h_i = f({i}) − f(∅), the single-removal losses every searcher shares.
J comes from gate gradients: for a quadratic, ∂f/∂x_i at x = e_j minus at x = 0 equals
2 J_ij, so L+1 gradient passes (one dense, one per single removal) give all of J; it is
symmetrised. That is O(L) forward+backward passes instead of the L(L−1)/2 pair
evaluations a model-free fit needs. The searcher receives only (h, J): it never sees
the model (``score.energy()``, see :mod:`depthprune.search.cbo`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from depthprune.scoring import _first_tensor

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.scoring import Scorer


def _gate_hook(gates: torch.Tensor, i: int):
    def hook(module, args, kwargs, output):
        inp = args[0] if args else kwargs["hidden_states"]
        out = _first_tensor(output)
        gated = inp + gates[i].to(out.dtype) * (out - inp)
        if isinstance(output, tuple):
            return (gated, *output[1:])
        return gated

    return hook


def reduce_weights(scorer: Scorer) -> list[torch.Tensor | None]:
    """d(loss)/d(stats) per micro-batch, from one dense pass.

    Objectives are linear in their statistics with coefficients that do not depend on
    the model (token counts, item counts), so these weights hold for every removal set.
    """
    with torch.no_grad():
        stats = []
        for batch in scorer.batches:
            out = scorer.decoder.owner(**batch.model_inputs(scorer.device), use_cache=False)
            stats.append(scorer.objective.batch_stats(out.last_hidden_state, batch, scorer.head))
    scorer.stats.layer_forwards += scorer.n_layers
    leaves = [s.detach().clone().requires_grad_(True) for s in stats]
    return list(torch.autograd.grad(scorer.objective.reduce(leaves), leaves, allow_unused=True))


def gate_gradient(scorer: Scorer, removed: frozenset[int],
                  weights: list[torch.Tensor | None] | None = None) -> torch.Tensor:
    """∂loss/∂x (x = 1 − gates) at the removal vector of ``removed``: [L] float64."""
    if weights is None:
        weights = reduce_weights(scorer)
    model, L = scorer.model, scorer.n_layers
    gates = torch.ones(L, dtype=torch.float32, device=scorer.device)
    for i in removed:
        gates[i] = 0.0
    gates.requires_grad_(True)
    layers = scorer.decoder.layers
    hooks = [layers[i].register_forward_hook(_gate_hook(gates, i), with_kwargs=True) for i in range(L)]
    objective, head = scorer.objective, scorer.head
    trainable = [p for p in model.parameters() if p.requires_grad]
    for p in trainable:  # only the gates need gradients
        p.requires_grad_(False)
    try:
        # Backpropagate each micro-batch with its weight (exact: reduce is linear).
        for batch, w in zip(scorer.batches, weights):
            if w is None:
                continue
            out = scorer.decoder.owner(**batch.model_inputs(scorer.device), use_cache=False)
            s = objective.batch_stats(out.last_hidden_state, batch, head)
            (s * w.to(s.dtype)).sum().backward()
    finally:
        for h in hooks:
            h.remove()
        for p in trainable:
            p.requires_grad_(True)
    scorer.stats.layer_forwards += L
    scorer.stats.layer_backwards += L
    return -gates.grad.detach().double().cpu()


def quadratic_energy(scorer: Scorer) -> tuple[list[float], list[list[float]]]:
    """(h, J) of the module docstring, for the scorer's model, objective and data."""
    L = scorer.n_layers
    base = scorer(frozenset())
    h = [scorer(frozenset([i])) - base for i in range(L)]
    weights = reduce_weights(scorer)
    g0 = gate_gradient(scorer, frozenset(), weights)
    J = torch.zeros(L, L, dtype=torch.float64)
    for j in range(L):
        J[:, j] = (gate_gradient(scorer, frozenset([j]), weights) - g0) / 2
    J = (J + J.T) / 2
    J.fill_diagonal_(0.0)
    return h, J.tolist()
