"""Benchmark: the output head's target log-probs against the plain out-of-place computation, one process.

:meth:`OutputHead.target_logprobs` on a bf16 head converts the weight to float32 once per weight version,
applies the softcap in place and takes the logsumexp in the logits' own storage (no gradient flowing).
``plain`` is what it did before: ``weight.float()`` per chunk, ``tanh(x / c) * c`` and
``torch.logsumexp`` out of place. Both run on the same bf16 hidden states, rounds interleaved
(plain in pedantic's ``setup``, timed by us; the head is the benchmarked function).

Shapes: gemma3-270m's head (262,144 x 640, softcap 30) and smollm2-135m's (49,152 x 576, none), on one
ppl micro-batch of the real grid (8 windows x 127 predicted positions), random weights (speed and
bit-identity do not depend on the values). Reported (extra_info, and a line with ``-s``): the ratio
plain seconds / head seconds (min over rounds; never asserted). Asserted in every mode: the two are
bit-identical. The test suite (``--benchmark-disable``) runs a 4,096-token vocabulary once; measure with
``DEPTHPRUNE_THREADS=1 pytest bench/test_bench_head.py -p no:xdist --benchmark-enable -s``.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (torch's idiom)

from depthprune.model.output_head import OutputHead
from depthprune.model.precision import onednn_bf16_fpmath

SHAPES = {"gemma3-270m": (262_144, 640, 30.0), "smollm2-135m": (49_152, 576, None)}
POSITIONS = 8 * 127


class _Model(nn.Module):
    def __init__(self, vocab: int, hidden: int, softcap: float | None):
        super().__init__()
        self.lm_head = nn.Linear(hidden, vocab, bias=False).to(torch.bfloat16).requires_grad_(False)
        self.config = SimpleNamespace(final_logit_softcapping=softcap)

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head


def plain(model: _Model, hidden: torch.Tensor, targets: torch.Tensor, softcap: float | None) -> torch.Tensor:
    """The head before: a float32 copy of the weight per call, element-wise steps out of place."""
    with onednn_bf16_fpmath(True):
        x = F.linear(hidden.float(), model.lm_head.weight.float())
    if softcap:
        x = torch.tanh(x / softcap) * softcap
    return x.gather(-1, targets[:, None]).squeeze(-1) - torch.logsumexp(x, dim=-1)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_head_against_plain(benchmark, shape):
    vocab, width, softcap = SHAPES[shape]
    if benchmark.disabled:
        vocab = 4096
    torch.manual_seed(0)
    model = _Model(vocab, width, softcap)
    head = OutputHead(model)
    hidden = torch.randn(POSITIONS, width).bfloat16()
    targets = torch.randint(0, vocab, (POSITIONS,))
    plain_seconds: list[float] = []

    def timed_plain():
        start = time.perf_counter()
        with torch.no_grad():
            out = plain(model, hidden, targets, softcap)
        plain_seconds.append(time.perf_counter() - start)
        timed_plain.out = out

    def run():
        with torch.no_grad():
            return head.target_logprobs(hidden, targets)

    rounds = 1 if benchmark.disabled else 5
    ours = benchmark.pedantic(run, setup=timed_plain, rounds=rounds, iterations=1, warmup_rounds=0)
    assert torch.equal(ours, timed_plain.out)
    if not benchmark.disabled:
        ratio = min(plain_seconds) / benchmark.stats.stats.min
        benchmark.extra_info.update({"vocab": vocab, "positions": POSITIONS, "threads": torch.get_num_threads(),
                                     "plain_over_head": round(ratio, 3)})
        print(f"\n{shape} head ({vocab} x {width}, softcap {softcap}), {POSITIONS} positions, "
              f"{torch.get_num_threads()} thread(s): plain / head = {ratio:.2f}")
