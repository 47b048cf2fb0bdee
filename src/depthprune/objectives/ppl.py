"""``ppl``: mean next-token NLL on calibration text (log of the calibration perplexity).

Paper setting: C4 (en) train, 128 windows of 2048 tokens, seed 0, each a random window
of a random document longer than the window (GPTQ/SLEB). Token-weighted: every
predicted token counts the same. The tiny profile reads the shipped C4-like fixture.

``packing="joined"`` (ours, for the data-vs-loss control): the records are joined into one
stream and cut into consecutive windows, so perplexity can be computed on data whose records
are shorter than a window — the margin's Commonsense-170k records, read as instruction +
output text (:func:`depthprune.data.sources.instruction_texts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from depthprune.common.params import check_choice, check_ints, check_shard, parse_shard
from depthprune.data.sources import (
    calibration_windows,
    instruction_texts,
    joined_windows,
    load_texts,
    take_shard,
)
from depthprune.model.output_head import OutputHead
from depthprune.objectives.base import Batch, Objective, register

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.data.profiles import Profile


PACKINGS = ("documents", "joined")


@register
@dataclass
class PerplexityObjective(Objective):
    name: ClassVar[str] = "ppl"
    dataset: str = "c4_train"
    n_samples: int = 128
    seq_len: int = 2048
    seed: int = 0
    packing: str = "documents"  # "documents": a random window of a random long document (GPTQ); "joined"
    shard: str = ""  # "i/n": only every n-th document from the i-th (disjoint samples; the calibration-size curve)
    _protocol: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice(self.name, "packing", self.packing, PACKINGS)
        check_ints(self.name, self, {"n_samples": 1, "seq_len": 2, "seed": 0})
        check_shard(self.name, self.shard)
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ValueError(f"{self.name}: dataset must be a dataset name, got {self.dataset!r}")

    def params(self) -> dict[str, Any]:
        params = {"dataset": self.dataset, "n_samples": self.n_samples, "seq_len": self.seq_len, "seed": self.seed,
                  "packing": self.packing}
        return params | ({"shard": self.shard} if self.shard else {})  # absent when unset: older fingerprints hold

    def prepare(self, tokenizer, profile: Profile, batch_size: int) -> list[Batch]:
        source = profile.source(self.dataset)
        if self.packing == "joined":
            texts = instruction_texts(source) if self.dataset == "commonsense170k" else load_texts(source)
            windows, protocol = joined_windows(take_shard(texts, self.shard), tokenizer, self.n_samples, self.seq_len,
                                               self.seed)
        else:
            windows, protocol = calibration_windows(
                take_shard(load_texts(source), self.shard), tokenizer, self.n_samples, self.seq_len, self.seed
            )
        shard = parse_shard(self.shard)
        self._protocol = {"source": source.describe(), **protocol.__dict__,
                          **({"shard": f"documents j with j % {shard[1]} == {shard[0]}"} if shard else {})}
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

