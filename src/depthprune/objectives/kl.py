"""``kl``: KL divergence from the dense model's next-token distribution (an addition).

KL(p_dense ‖ p_pruned), averaged over every predicted token of the same calibration
windows as ``ppl``. Unlike perplexity it asks the pruned model to stay *the same model*,
not merely a good language model, which makes it a natural third objective for the
paper's question.

Memory-bounded for 128k vocabularies: the dense model's *final hidden states* are kept
(one tensor the size of a cached boundary, captured during the dense run that the
scoring engine makes first), and the dense log-probs are recomputed from them with the
output head a chunk of tokens at a time. Full dense distributions are never stored.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from depthprune.model.output_head import OutputHead
from depthprune.objectives.base import Batch, register
from depthprune.objectives.ppl import PerplexityObjective


@register
@dataclass
class KLObjective(PerplexityObjective):
    name: ClassVar[str] = "kl"
    needs_reference: ClassVar[bool] = True
    _reference: dict[int, torch.Tensor] = field(default_factory=dict, repr=False, compare=False)

    def set_reference(self, index: int, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> None:
        self._reference[index] = hidden.detach().clone()
        batch.payload["kl_reference"] = index

    def batch_stats(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        """Summed KL over the batch's predicted tokens, and their count, a head chunk at a time
        (:meth:`~depthprune.model.output_head.OutputHead.per_chunk`: checkpointed when gradients flow, so cbo's backward keeps
        hidden states, not two vocabulary-wide distributions)."""
        index = batch.payload.get("kl_reference")
        if index is None:
            raise RuntimeError("kl objective used before the dense reference was recorded")
        ref = self._reference[index]
        h = hidden[:, :-1].reshape(-1, hidden.shape[-1])
        r = ref[:, :-1].reshape(-1, ref.shape[-1])
        total = torch.zeros((), dtype=torch.float64, device=hidden.device)
        for part in head.per_chunk(functools.partial(_chunk_kl, head), h, r):
            total = total + part
        count = torch.tensor(float(h.shape[0]), dtype=torch.float64, device=hidden.device)
        return torch.stack([total, count])

    def protocol(self) -> dict[str, Any]:
        return {**super().protocol(), "divergence": "KL(p_dense || p_pruned), token-averaged"}


def _chunk_kl(head: OutputHead, hidden: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Sum over a chunk's tokens of KL(p_reference || p_hidden), in float64."""
    lp = torch.log_softmax(head.logits(hidden), dim=-1)
    lq = torch.log_softmax(head.logits(reference), dim=-1)
    return (lq.exp() * (lq - lp)).sum().double()
