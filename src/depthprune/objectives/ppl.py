"""``ppl``: mean next-token NLL on calibration text (log of the calibration perplexity).

Paper setting: C4 (en) train, 128 windows of 2048 tokens, seed 0, each a random window
of a random document longer than the window (GPTQ/SLEB). Token-weighted: every
predicted token counts the same. The tiny profile reads the shipped C4-like fixture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from depthprune.data import calibration_windows, load_texts
from depthprune.objectives.base import Batch, Objective, OutputHead, register

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.profiles import Profile


@register
@dataclass
class PerplexityObjective(Objective):
    name: ClassVar[str] = "ppl"
    dataset: str = "c4_train"
    n_samples: int = 128
    seq_len: int = 2048
    seed: int = 0
    _protocol: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def params(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "n_samples": self.n_samples, "seq_len": self.seq_len, "seed": self.seed}

    def prepare(self, tokenizer, profile: Profile, batch_size: int) -> list[Batch]:
        source = profile.source(self.dataset)
        windows, protocol = calibration_windows(
            load_texts(source), tokenizer, self.n_samples, self.seq_len, self.seed
        )
        self._protocol = {"source": source.describe(), **protocol.__dict__}
        return [Batch(windows[i : i + batch_size]) for i in range(0, len(windows), batch_size)]

    def batch_stats(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        ids = batch.input_ids.to(hidden.device)
        h = hidden[:, :-1].reshape(-1, hidden.shape[-1])
        targets = ids[:, 1:].reshape(-1)
        logp = head.target_logprobs(h, targets)
        return torch.stack([-logp.double().sum(), torch.tensor(float(targets.numel()), dtype=torch.float64,
                                                                device=logp.device)])

    def reduce(self, stats: list[torch.Tensor]) -> torch.Tensor:
        total = torch.stack(stats).sum(0)
        return total[0] / total[1]

    def protocol(self) -> dict[str, Any]:
        return dict(self._protocol)

