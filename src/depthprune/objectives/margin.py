"""``margin``: the task likelihood margin (PuDDing, Wee et al. 2025).

For an item with options k = 1..K and gold c, ℓ_k is the mean log-prob of option k's
answer tokens given the prompt; the item's margin is Σ_{j≠c} (ℓ_c − ℓ_j), and the loss
is −(mean margin over items): lower loss = the model prefers the right answers by more.

Paper setting: 128 items of Commonsense-170k, seed 0. Each record's options are the
labels of its ``Answer format:`` line (``answer1/answer2/...``); the prompt is the
instruction followed by the record's own answer lead, ``"the correct answer is"``, and
each option is scored as the continuation (see :func:`depthprune.data.parse_commonsense_record`).

All K continuations of every item are scored as separate right-padded sequences (no
attention mask is needed: padding only follows real tokens under causal attention).
The loss is linear in the ℓ's — loss = Σ w·ℓ with w = −(K−1)/N for gold options and
+1/N for the others — which is what makes gradients accumulate over micro-batches.
Items longer than ``max_len`` raise; nothing is truncated silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from depthprune.data import load_choice_items, source_for
from depthprune.objectives.base import Batch, Objective, OutputHead


@dataclass
class MarginObjective(Objective):
    name: ClassVar[str] = "margin"
    dataset: str = "commonsense170k"
    n_items: int = 128
    seed: int = 0
    max_len: int = 2048
    _protocol: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def params(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "n_items": self.n_items, "seed": self.seed, "max_len": self.max_len}

    def prepare(self, tokenizer, profile: str, batch_size: int) -> list[Batch]:
        source = source_for(self.dataset, profile)
        items = load_choice_items(source, self.n_items, self.seed)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        seqs: list[tuple[list[int], int, float]] = []  # ids, n_answer_tokens, weight
        n = len(items)
        too_long = []
        for idx, item in enumerate(items):
            context = tokenizer(item.prompt)["input_ids"]
            k = len(item.choices)
            for j, choice in enumerate(item.choices):
                answer = tokenizer(choice, add_special_tokens=False)["input_ids"]
                if not answer:
                    raise ValueError(f"item {idx}: option {choice!r} tokenises to nothing")
                ids = context + answer
                if len(ids) > self.max_len:
                    too_long.append((idx, len(ids)))
                weight = -(k - 1) / n if j == item.gold else 1.0 / n
                seqs.append((ids, len(answer), weight))
        if too_long:
            raise ValueError(
                f"{len(too_long)} margin item(s) exceed max_len={self.max_len} tokens "
                f"(first: item {too_long[0][0]} with {too_long[0][1]}); raise max_len or choose other items"
            )
        order = sorted(range(len(seqs)), key=lambda i: (-len(seqs[i][0]), i))  # similar lengths together
        batches = []
        for start in range(0, len(order), batch_size):
            chunk = [seqs[i] for i in order[start : start + batch_size]]
            width = max(len(ids) for ids, _, _ in chunk)
            input_ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            answer_mask = torch.zeros((len(chunk), width - 1), dtype=torch.bool)  # predicts token t+1
            for row, (ids, n_answer, _w) in enumerate(chunk):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                answer_mask[row, len(ids) - 1 - n_answer : len(ids) - 1] = True
            weights = torch.tensor([w for _, _, w in chunk], dtype=torch.float64)
            batches.append(Batch(input_ids, {"answer_mask": answer_mask, "weights": weights}))
        self._protocol = {
            "source": source.describe(), "n_items": n, "n_sequences": len(seqs), "seed": self.seed,
            "options_per_item": sorted({len(it.choices) for it in items}),
            "scored_tokens": "the option label's tokens after '<instruction>\\n\\nthe correct answer is'",
            "aggregation": "mean log-prob per option; margin = sum_{j!=gold}(l_gold - l_j); loss = -mean margin",
        }
        return batches

    def option_logprobs(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        """ℓ for every sequence of the batch: mean log-prob of its answer tokens."""
        ids = batch.input_ids.to(hidden.device)
        mask = batch.payload["answer_mask"].to(hidden.device)
        rows, cols = mask.nonzero(as_tuple=True)
        logp = head.target_logprobs(hidden[rows, cols], ids[rows, cols + 1]).double()
        sums = torch.zeros(ids.shape[0], dtype=torch.float64, device=hidden.device).index_add(0, rows, logp)
        return sums / mask.sum(1).double()

    def batch_stats(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        ell = self.option_logprobs(hidden, batch, head)
        return (ell * batch.payload["weights"].to(ell.device)).sum().reshape(1)

    def reduce(self, stats: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(stats).sum()

    def protocol(self) -> dict[str, Any]:
        return dict(self._protocol)


OBJECTIVE = MarginObjective
