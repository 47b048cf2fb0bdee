"""Per-block gates and the quadratic energy that ``cbo`` minimises.

A gate g_i scales block i's residual update: h_{i+1} = h_i + g_i (block_i(h_i) − h_i).
g_i = 1 is the dense model, g_i = 0 removes the block exactly. With the removal vector
x = 1 − g, the loss f(x) is modelled as a quadratic on binary x (x_i² = x_i, so the
diagonal folds into the linear term):

    f(x) ≈ f(0) + h·x + xᵀ J x,     J symmetric, zero diagonal.

h is *exact*: h_i = f({i}) − f(∅), the single-removal losses every searcher shares; the
caller passes them in. J comes from gate gradients: for a quadratic, ∂f/∂x_i at x = e_j
minus at x = 0 equals 2 J_ij, so L+1 gradient passes (one dense, one per single removal)
give all of J; it is symmetrised. That is O(L) forward+backward passes instead of the
L(L−1)/2 pair evaluations a model-free fit needs. The searcher receives only (h, J): it
never sees the model (``score.energy()``, see :mod:`depthprune.search.cbo`).

Memory: a gradient pass keeps, for the backward, only each block's input and gated update and
recomputes the rest of the block there (activation checkpointing, :func:`recompute_in_backward`;
the output head's chunks likewise, in :meth:`~depthprune.model.output_head.OutputHead.target_logprobs`). Without it, an 8B
model's backward through every block of an 8 x 2048 micro-batch would hold ~76 GiB of
activations, which does not fit on an 80 GB GPU beside the weights and the prefix cache
(``depthprune plan``); with it, ~2 boundary states per block plus one block's activations.
The recomputation runs the same kernels on the same inputs, so the gradients are the same. It is
needed only where memory is short: :func:`quadratic_energy` first runs the dense pass without it,
counting the bytes autograd keeps, and falls back to it as soon as a micro-batch keeps more than
:data:`KEEP_SHARE` of the device's memory. A tiny model's energy then skips the blocks' second
forward (~19% of its time, measured on tiny-llama3 in bf16 on AMX: bench/test_bench_scoring.py); an 8B
model's (~76 GiB over its 32 blocks, ~2.4 GiB a block) falls back within its first few blocks.

This module knows the model only through :class:`~depthprune.scoring.calibration.CalibrationData`;
the scoring engine calls it and adds :func:`energy_passes` to its counters.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from depthprune.common.machine import device_memory
from depthprune.model.masking import hidden_of
from depthprune.scoring.calibration import CalibrationData

#: the share of the device's memory one micro-batch's gradient pass may keep for its backward before the
#: blocks are recomputed instead (module docstring)
KEEP_SHARE = 0.1


class KeepsTooMuch(RuntimeError):
    """A gradient pass without recomputation kept more than its limit: run it with recomputation."""


def keep_limit(device: torch.device) -> int:
    """:data:`KEEP_SHARE` of the device's memory (:func:`depthprune.common.machine.device_memory`), in bytes."""
    return int(device_memory(device) * KEEP_SHARE)


@contextmanager
def _kept_at_most(limit: int | None) -> Iterator[None]:
    """Count the bytes autograd keeps for the backward; raise :class:`KeepsTooMuch` past ``limit``. An upper
    bound: a tensor saved twice, or a weight saved for an input's gradient, counts each time."""
    if limit is None:
        yield
        return
    kept = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal kept
        kept += t.numel() * t.element_size()
        if kept > limit:
            raise KeepsTooMuch(f"a gradient pass kept more than {limit} bytes for its backward")
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield


def energy_passes(n_layers: int) -> tuple[int, int]:
    """(layer-forwards, layer-backwards) that :func:`quadratic_energy` costs for L layers:
    one dense pass for the reduce weights, then L+1 forward+backward gradient passes."""
    return n_layers + (n_layers + 1) * n_layers, (n_layers + 1) * n_layers


def _gate_hook(gates: torch.Tensor, i: int, dtype: torch.dtype):
    def hook(module, args, kwargs, output):
        inp = args[0] if args else kwargs["hidden_states"]
        out = hidden_of(output)
        # In float32 (``dtype``) whatever the blocks' dtype: the gate's gradient is a sum over every
        # hidden element, and J = (g_j - g0) / 2 a difference of two nearly equal gradients, which
        # bf16's 8-bit mantissa rounds away (tests/model/test_precision.py). At g = 1 the update is exact
        # in float32, so the rounded output equals the block's own.
        gated = (inp.to(dtype) + gates[i].to(dtype) * (out.to(dtype) - inp.to(dtype))).to(out.dtype)
        if isinstance(output, tuple):
            return (gated, *output[1:])
        return gated

    return hook


@contextmanager
def recompute_in_backward(layers: Sequence[nn.Module]) -> Iterator[None]:
    """Run each block under activation checkpointing (non-reentrant) while the context is open.

    Only ``forward`` is wrapped, so forward hooks (the gates) still run on the block's output,
    outside the checkpoint; the block's kwargs (masks, rotary embeddings) pass through.
    """
    wrapped = []
    for layer in layers:
        own = "forward" in vars(layer)
        original = layer.forward

        def forward(*args, _original=original, **kwargs):
            return checkpoint(_original, *args, use_reentrant=False, **kwargs)

        layer.forward = forward
        wrapped.append((layer, own, original))
    try:
        yield
    finally:
        for layer, own, original in wrapped:
            if own:
                layer.forward = original
            else:
                del layer.forward


def reduce_weights(data: CalibrationData) -> list[torch.Tensor | None]:
    """d(loss)/d(stats) per micro-batch, from one dense pass.

    Objectives are linear in their statistics with coefficients that do not depend on
    the model (token counts, item counts), so these weights hold for every removal set.
    """
    with torch.no_grad():
        stats = []
        for batch in data.batches:
            out = data.decoder.owner(**batch.model_inputs(data.device), use_cache=False)
            stats.append(data.objective.batch_stats(out.last_hidden_state, batch, data.head))
    leaves = [s.detach().clone().requires_grad_(True) for s in stats]
    return list(torch.autograd.grad(data.objective.reduce(leaves), leaves, allow_unused=True))


def gate_gradient(data: CalibrationData, removed: frozenset[int],
                  weights: list[torch.Tensor | None] | None = None, recompute: bool = True,
                  gate_dtype: torch.dtype = torch.float32, limit: int | None = None) -> torch.Tensor:
    """∂loss/∂x (x = 1 − gates) at the removal vector of ``removed``: [L] float64.

    ``recompute``: activation checkpointing of the blocks (module docstring); ``limit``: the bytes one
    micro-batch may keep for its backward, else :class:`KeepsTooMuch`; ``gate_dtype``: the precision of the
    gate product (:func:`_gate_hook`), changed only to test it.
    """
    if weights is None:
        weights = reduce_weights(data)
    L = data.n_layers
    gates = torch.ones(L, dtype=torch.float32, device=data.device)
    for i in removed:
        gates[i] = 0.0
    gates.requires_grad_(True)
    layers = data.decoder.layers
    hooks = [layers[i].register_forward_hook(_gate_hook(gates, i, gate_dtype), with_kwargs=True) for i in range(L)]
    trainable = [p for p in data.model.parameters() if p.requires_grad]
    for p in trainable:  # only the gates need gradients
        p.requires_grad_(False)
    try:
        # Backpropagate each micro-batch with its weight (exact: reduce is linear).
        with recompute_in_backward(layers if recompute else ()):
            for batch, w in zip(data.batches, weights):
                if w is None:
                    continue
                with _kept_at_most(limit):
                    out = data.decoder.owner(**batch.model_inputs(data.device), use_cache=False)
                    s = data.objective.batch_stats(out.last_hidden_state, batch, data.head)
                (s * w.to(s.dtype)).sum().backward()
    finally:
        for h in hooks:
            h.remove()
        for p in trainable:
            p.requires_grad_(True)
    return -gates.grad.detach().double().cpu()


def quadratic_energy(data: CalibrationData, h: list[float], gate_dtype: torch.dtype = torch.float32,
                     limit: int | None = None) -> tuple[list[float], list[list[float]]]:
    """(h, J) of the module docstring; ``h`` = the single-removal loss increases f({i}) − f(∅).

    ``limit``: the bytes a micro-batch may keep for its backward without recomputation (default
    :func:`keep_limit`); the dense pass decides for all (a single removal's pass keeps no more)."""
    L = data.n_layers
    if len(h) != L:
        raise ValueError(f"h has {len(h)} entries for {L} layers")
    weights = reduce_weights(data)
    try:
        recompute = False
        g0 = gate_gradient(data, frozenset(), weights, recompute=False, gate_dtype=gate_dtype,
                           limit=keep_limit(data.device) if limit is None else limit)
    except KeepsTooMuch:
        recompute = True
        g0 = gate_gradient(data, frozenset(), weights, gate_dtype=gate_dtype)
    J = torch.zeros(L, L, dtype=torch.float64)
    for j in range(L):
        J[:, j] = (gate_gradient(data, frozenset([j]), weights, recompute=recompute, gate_dtype=gate_dtype) - g0) / 2
    J = (J + J.T) / 2
    J.fill_diagonal_(0.0)
    return list(h), J.tolist()
