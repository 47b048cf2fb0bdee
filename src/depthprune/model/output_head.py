"""The output head as the scoring engine and the evaluation use it: final hidden states in, log-probabilities
out, a chunk of tokens at a time, never a whole logits tensor (128k-262k-token vocabularies).

It belongs with the model (it reads the model's config and ``lm_head``) and below both of its callers, the
objectives (:mod:`depthprune.objectives.base`) and the evaluation (:mod:`depthprune.evaluation`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from depthprune.model.precision import onednn_bf16_fpmath

#: Ours: the logits (bytes) one element-wise pass of the head works on at a time: gemma3's 262k-token
#: rows are 1 MB each in float32, a slice of them stays in a core's 2-4 MB L2 (:meth:`OutputHead.logit_rows`).
ROW_SLICE_BYTES = 1 << 20
#: float32 logits per head chunk when gradients flow (cbo's gate gradients): a checkpointed chunk's
#: backward recomputes its logits and holds several logits-sized tensors at once (the product, the
#: softcap's tanh, logsumexp's gradient). Measured on gemma3-270m ppl (262k vocabulary, one 1,016-row
#: micro-batch, bf16): a gate-gradient pass took its process to 7.96 GB RSS (4.7 GB over the loaded
#: model and data) with the micro-batch as one chunk, to 4.69 GB (0.55 GB over) at 256 rows (this
#: budget), gradients bit-identical (AMD EPYC, 2026-12-02; figures in the commit that set it). Smaller
#: vocabularies keep whole micro-batches (smollm2: 1,365 rows; the tiny models: 16,384).
GRAD_CHUNK_BYTES = 256 << 20


def grad_chunk_rows(vocab: int, chunk_tokens: int) -> int:
    """Rows per head chunk when gradients flow: ``chunk_tokens``, capped so one chunk's float32
    logits stay within ``GRAD_CHUNK_BYTES`` (also the planner's memory model)."""
    return max(1, min(chunk_tokens, GRAD_CHUNK_BYTES // (4 * vocab)))


class OutputHead:
    """Turns final hidden states into log-probabilities, a chunk of tokens at a time.

    Applies what decoder forwards do after ``lm_head``, read from the config:
    Granite's ``logits_scaling`` (divide), Cohere's ``logit_scale`` (multiply) and Gemma's
    ``final_logit_softcapping``. The scorer's start-up self-check compares the result
    with the model's own logits, so an architecture that does something else is refused.

    The logits are float32 also for a bf16 model: a bf16 matmul rounds each logit to 8
    mantissa bits (up to 0.35% of the largest) before any cast, and on smollm2-135m that
    reordered near-tied candidate sets of a greedy step (DESIGN.md, "Numeric precision").
    So the head's product runs on float32 copies of its bf16 inputs, which are exact (on a CPU on
    oneDNN's bf16 kernels with float32 accumulation and output: :func:`depthprune.model.precision.onednn_bf16_fpmath`); on
    CUDA a bf16 matmul with a float32 output does the same at bf16 speed where torch has one.
    """

    def __init__(self, model: nn.Module, chunk_tokens: int = 2048) -> None:
        head = model.get_output_embeddings()
        if head is None:
            raise ValueError(f"{type(model).__name__} has no output embeddings (lm_head)")
        self.head = head
        config = model.config
        self.scale = 1.0 / float(getattr(config, "logits_scaling", 1.0) or 1.0)
        self.scale *= float(getattr(config, "logit_scale", 1.0) or 1.0)
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.chunk_tokens = chunk_tokens
        self._weight_f32: tuple[tuple[Any, ...], torch.Tensor] | None = None

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._finish(self._product(hidden))

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        """The scale and softcap; in place on float32 ``x`` without gradients: the same element-wise
        kernels as out of place, bit-identical. The logits are the largest tensor a forward makes (1 GB
        per 1,024 positions of gemma3's 262k vocabulary), and each out-of-place pass wrote a new copy
        (measured: 1.25 s -> 0.29 s for the softcap of such a chunk, 1 thread)."""
        if self.scale == 1.0 and not self.softcap:
            return x.float()
        if x.requires_grad or x.dtype != torch.float32:  # autograd keeps tanh's output: no in-place ops
            if self.scale != 1.0:
                x = x * self.scale
            if self.softcap:
                x = torch.tanh(x / self.softcap) * self.softcap
            return x.float()
        if self.scale != 1.0:
            x.mul_(self.scale)
        if self.softcap:
            x.div_(self.softcap).tanh_().mul_(self.softcap)
        return x

    def logit_rows(self, hidden: torch.Tensor) -> Iterator[tuple[slice, torch.Tensor]]:
        """``(rows, logits(hidden)[rows])`` over slices of about ``ROW_SLICE_BYTES`` each, for code
        that reduces each row (log-softmax, logsumexp). The product runs on the whole chunk (a matmul
        wants many rows); the scale, softcap and the caller's reductions then run on a cache-sized slice
        at a time instead of streaming the chunk's logits through memory once per pass: row-wise
        kernels, so bit-identical (tests): those passes ~1.7x faster on a 2,048 x 262k chunk, a gemma3 ppl
        scored set 1.09x (1 thread; docs/measurements.md). A slice
        is a view of one buffer, which the caller may overwrite. With gradients: one slice, all rows."""
        x = self._product(hidden)
        if x.requires_grad or x.dtype != torch.float32:
            yield slice(None), self._finish(x)
            return
        step = max(1, ROW_SLICE_BYTES // max(1, x.shape[-1] * x.element_size()))
        for start in range(0, max(1, x.shape[0]), step):  # an empty chunk: one empty slice
            rows = slice(start, start + step)
            yield rows, self._finish(x[rows])

    def _product(self, hidden: torch.Tensor) -> torch.Tensor:
        """``lm_head(hidden)`` with float32 output (class docstring)."""
        head = self.head
        if hidden.dtype == torch.float32 or not isinstance(head, nn.Linear):
            return head(hidden)
        if hidden.is_cuda and not torch.is_grad_enabled() and head.bias is None:
            try:
                flat = hidden.reshape(-1, hidden.shape[-1])
                return torch.mm(flat, head.weight.t(), out_dtype=torch.float32).view(*hidden.shape[:-1], -1)
            except (RuntimeError, TypeError):  # no bf16 -> fp32 kernel in this torch
                pass
        bias = None if head.bias is None else head.bias.float()
        exact_bf16 = hidden.dtype == torch.bfloat16 and head.weight.dtype == torch.bfloat16 and not hidden.is_cuda
        with onednn_bf16_fpmath(exact_bf16):
            return nn.functional.linear(hidden.float(), self._float_weight(), bias)

    def _float_weight(self) -> torch.Tensor:
        """``head.weight.float()``, converted once rather than per chunk while the weight is unchanged
        (same tensor, same version): an exact copy, so the product is bit-identical. Measured on
        gemma3's 262k x 640 head: 0.22 s per chunk, 1 thread. Not cached where the weight needs gradients."""
        weight = self.head.weight
        if weight.requires_grad and torch.is_grad_enabled():
            return weight.float()
        key = (weight.data_ptr(), weight._version, weight.dtype, weight.device, tuple(weight.shape))
        if self._weight_f32 is None or self._weight_f32[0] != key:
            self._weight_f32 = (key, weight.detach().float())
        return self._weight_f32[1]

    def target_logprobs(self, hidden: torch.Tensor, targets: torch.Tensor,
                        rows: torch.Tensor | None = None) -> torch.Tensor:
        """log p(targets[n] | hidden[n]) for flat ``hidden`` [N, H] and ``targets`` [N]; with ``rows`` [N],
        log p(targets[n] | hidden[rows[n]]) for ``hidden`` [U, H]: a state several targets are read from (each
        option's first token after a prompt the options share) goes through the head once, not once per target.
        A row's logits are the same either way where the product's rows do not depend on the rows beside them
        (tests/model/test_output_head.py checks it on the machine it runs on)."""
        if rows is None:  # one target per state: the rows are the states' own order, already sorted
            if targets.shape != hidden.shape[:1]:
                raise ValueError(f"targets must hold one target per row of hidden, got shapes {tuple(targets.shape)} "
                                 f"and {tuple(hidden.shape)}")
            order = None
            rows_in_order = torch.arange(hidden.shape[0], device=targets.device)
            targets_in_order = targets
        else:
            if targets.shape != rows.shape:
                raise ValueError(f"rows and targets must pair up, got shapes {tuple(rows.shape)} and "
                                 f"{tuple(targets.shape)}")
            order = torch.argsort(rows, stable=True)  # each chunk of states reads a contiguous run of targets
            rows_in_order, targets_in_order = rows[order], targets[order]
        grad, step = self._chunking(hidden)
        bounds = torch.searchsorted(rows_in_order, torch.arange(0, hidden.shape[0] + step, step,
                                                                device=rows_in_order.device)).tolist()
        out = []
        for k, start in enumerate(range(0, hidden.shape[0], step)):
            lo, hi = bounds[k], bounds[k + 1]
            if lo == hi:
                continue
            out.append(_on_chunk(self._chunk_logprobs, grad, hidden[start : start + step],
                                 rows_in_order[lo:hi] - start, targets_in_order[lo:hi]))
        if not out:
            return hidden.new_zeros(0, dtype=torch.float32)
        picked = torch.cat(out)
        return picked if order is None else picked[torch.argsort(order)]  # back to the targets' own order

    def grad_chunk_tokens(self) -> int:
        """:func:`~depthprune.model.output_head.grad_chunk_rows` for this head's vocabulary
        (``chunk_tokens`` if it has no weight)."""
        weight = getattr(self.head, "weight", None)
        return self.chunk_tokens if weight is None else grad_chunk_rows(int(weight.shape[0]), self.chunk_tokens)

    def per_chunk(self, fn: Callable[..., torch.Tensor], *flat: torch.Tensor) -> list[torch.Tensor]:
        """``fn`` on ``chunk_tokens`` rows of each flat tensor at a time, so memory does not grow with
        the vocabulary. When gradients flow (cbo's gate gradients), each chunk is checkpointed: the
        backward keeps the chunk's inputs, not its logits, and recomputes them one chunk at a time,
        of :meth:`grad_chunk_tokens` rows."""
        grad, step = self._chunking(*flat)
        return [_on_chunk(fn, grad, *(t[start : start + step] for t in flat)) for start in range(0, flat[0].shape[0], step)]

    def _chunking(self, *flat: torch.Tensor) -> tuple[bool, int]:
        """Whether gradients flow through ``flat``, and the rows per chunk that follow from it (:meth:`per_chunk`)."""
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in flat)
        return grad, self.grad_chunk_tokens() if grad else self.chunk_tokens

    def _chunk_logprobs(self, hidden: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """log p(targets[n] | hidden[rows[n]]) for ``rows`` sorted: each slice of states' logits, the targets it
        serves picked and then its log-normalizer taken once per state. Picking and indexing copy values, so a
        target's log-probability is the same whether its state serves one target or several."""
        out = []
        sorted_rows = rows.tolist()  # the slices' bounds by bisection: a few microseconds, not tensor ops per slice
        for span, logits in self.logit_rows(hidden):
            start = span.start or 0
            stop = hidden.shape[0] if span.stop is None else min(span.stop, hidden.shape[0])
            lo, hi = bisect.bisect_left(sorted_rows, start), bisect.bisect_left(sorted_rows, stop)
            if lo == hi:
                continue
            local = rows[lo:hi] - start
            picked = logits[local, targets[lo:hi]]
            norm = torch.logsumexp(logits, dim=-1) if logits.requires_grad else _logsumexp_(logits)
            out.append(picked - norm[local])
        return torch.cat(out) if len(out) != 1 else out[0]


def _on_chunk(fn: Callable[..., torch.Tensor], grad: bool, *chunk: torch.Tensor) -> torch.Tensor:
    """``fn(*chunk)``, checkpointed where gradients flow: the backward keeps the chunk's inputs, not its logits."""
    return checkpoint(fn, *chunk, use_reentrant=False) if grad else fn(*chunk)


def _logsumexp_(x: torch.Tensor) -> torch.Tensor:
    """``torch.logsumexp(x, -1)`` computed in ``x``'s own storage, which it overwrites: the same steps as
    torch's own (ATen's logsumexp_out_impl: amax, an infinite max read as 0, exp of the difference, sum,
    log, add), so bit-identical, without a second logits-sized tensor (0.79 s -> 0.42 s on 1,016 x 262k,
    1 thread)."""
    top = torch.amax(x, dim=-1, keepdim=True)
    shift = top.squeeze(-1)
    shift.masked_fill_(shift.abs() == float("inf"), 0)  # a view of top: the subtraction below sees it too
    return x.sub_(top).exp_().sum(dim=-1).log_().add_(shift)
