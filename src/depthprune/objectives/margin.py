"""``margin``: the task likelihood margin (PuDDing, Wee et al. 2025).

For an item with options k = 1..K and gold c, ℓ_k is the mean log-prob of option k's
answer tokens given the prompt; the item's margin is Σ_{j≠c} (ℓ_c − ℓ_j), and the loss
is −(mean margin over items): lower loss = the model prefers the right answers by more.

Paper setting: 128 items of Commonsense-170k, seed 0. Each record's options are the
labels of its ``Answer format:`` line (``answer1/answer2/...``); the prompt is the
instruction followed by the record's own answer lead, ``"the correct answer is"``, and
each option is scored as the continuation (see :func:`depthprune.data.sources.parse_commonsense_record`;
``answer`` chooses label, option text, or a cloze form without the option list).

By default (``share_prompt=True``) all K options of an item are packed after one copy of
its prompt, with a 4D attention mask and continued position ids, so each option is
computed exactly as if it followed the prompt alone while the prompt is computed once
(:func:`_pack`); ``share_prompt=False`` scores each option as its own right-padded
sequence (no mask needed: padding only follows real tokens under causal attention).
The loss is linear in the ℓ's — loss = Σ w·ℓ with w = −(K−1)/N for gold options and
+1/N for the others — which is what makes gradients accumulate over micro-batches.
Items longer than ``max_len`` raise; nothing is truncated silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from depthprune.common.params import check_choice, check_ints, check_shard
from depthprune.data.sources import load_choice_items
from depthprune.model.output_head import OutputHead
from depthprune.objectives.base import Batch, Objective, register

if TYPE_CHECKING:  # pragma: no cover
    from depthprune.data.profiles import Profile


_SCORED = {
    "label": "the option label's tokens after '<instruction>\n\nthe correct answer is'",
    "option": "the option text's tokens after '<instruction>\n\nthe correct answer is'",
    "cloze": ("the option text's tokens as the continuation of the question stem (options not shown; "
              "blank: before '_' | ending: the stem | else 'Question: <stem>\nAnswer:')"),
}


@register
@dataclass
class MarginObjective(Objective):
    name: ClassVar[str] = "margin"
    dataset: str = "commonsense170k"
    n_items: int = 128
    seed: int = 0
    max_len: int = 2048
    share_prompt: bool = True
    # "label": score " answer2" (the record's output); "option": the option's text after the
    # instruction; "cloze": the option's text as the question stem's continuation, no options shown
    answer: str = "label"
    shard: str = ""  # "i/n": only every n-th record from the i-th (disjoint samples; the calibration-size curve)
    _protocol: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_choice("margin", "answer", self.answer, tuple(_SCORED))
        check_choice("margin", "share_prompt", self.share_prompt, (True, False))
        check_ints("margin", self, {"n_items": 1, "seed": 0, "max_len": 2})
        check_shard("margin", self.shard)
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ValueError(f"margin: dataset must be a dataset name, got {self.dataset!r}")

    def params(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "n_items": self.n_items, "seed": self.seed, "max_len": self.max_len,
                "share_prompt": self.share_prompt, "answer": self.answer} | ({"shard": self.shard} if self.shard else {})

    def prepare(self, tokenizer, profile: Profile, batch_size: int) -> list[Batch]:
        source = profile.source(self.dataset)
        items = load_choice_items(source, self.n_items, self.seed, answer=self.answer, shard=self.shard)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        n = len(items)
        rows: list[_Row] = []
        too_long = []
        for idx, item in enumerate(items):
            context = tokenizer(item.prompt)["input_ids"]
            k = len(item.choices)
            answers = []
            for j, choice in enumerate(item.choices):
                answer = tokenizer(choice, add_special_tokens=False)["input_ids"]
                if not answer:
                    raise ValueError(f"item {idx}: option {choice!r} tokenises to nothing")
                answers.append((answer, -(k - 1) / n if j == item.gold else 1.0 / n))
            if self.share_prompt:
                rows.append(_Row(context, answers))
            else:
                rows.extend(_Row(context, [a]) for a in answers)
            longest = len(context) + (sum(len(a) for a, _ in answers) if self.share_prompt
                                      else max(len(a) for a, _ in answers))
            if longest > self.max_len:
                too_long.append((idx, longest))
        if too_long:
            raise ValueError(
                f"{len(too_long)} margin item(s) exceed max_len={self.max_len} tokens "
                f"(first: item {too_long[0][0]} with {too_long[0][1]}); raise max_len or choose other items"
            )
        order = sorted(range(len(rows)), key=lambda i: (-rows[i].length, i))  # similar lengths together
        batches = [_pack([rows[i] for i in order[s : s + batch_size]], pad, self.share_prompt)
                   for s in range(0, len(order), batch_size)]
        self._protocol = {
            "source": source.describe(), "n_items": n, "n_options": sum(len(r.answers) for r in rows),
            "seed": self.seed, **({"shard": self.shard} if self.shard else {}), "options_per_item": sorted({len(it.choices) for it in items}),
            "scored_tokens": _SCORED[self.answer],
            "aggregation": "mean log-prob per option; margin = sum_{j!=gold}(l_gold - l_j); loss = -mean margin",
            "shared_prompt": self.share_prompt,
            "tokens_per_pass": sum(b.input_ids.numel() for b in batches),
        }
        return batches

    def option_logprobs(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        """ℓ for every option of the batch (in packing order): mean log-prob of its tokens. Every option's first
        token is read from the state of its prompt's last token, which the options share: each such state goes
        through the head once (on gemma3's WordNet items, 232 states for 616 option tokens): the same bits. Not
        where gradients flow (cbo's gate gradients): a shared state's gradient would then be summed in another
        order, so those passes read each target's state apart, as before."""
        p = batch.payload
        rows, cols = p["rows"].to(hidden.device), p["cols"].to(hidden.device)
        targets = p["targets"].to(hidden.device)
        if torch.is_grad_enabled() and hidden.requires_grad:
            logp = head.target_logprobs(hidden[rows, cols], targets).double()
        else:
            states, which = torch.unique(rows * hidden.shape[1] + cols, return_inverse=True)
            logp = head.target_logprobs(hidden.reshape(-1, hidden.shape[-1])[states], targets, rows=which).double()
        option = p["option"].to(hidden.device)
        sums = torch.zeros(len(p["weights"]), dtype=torch.float64, device=hidden.device).index_add(0, option, logp)
        counts = torch.zeros_like(sums).index_add(0, option, torch.ones_like(logp))
        return sums / counts

    def batch_stats(self, hidden: torch.Tensor, batch: Batch, head: OutputHead) -> torch.Tensor:
        ell = self.option_logprobs(hidden, batch, head)
        return (ell * batch.payload["weights"].to(ell.device)).sum().reshape(1)

    def reduce(self, stats: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(stats).sum()

    def protocol(self) -> dict[str, Any]:
        return dict(self._protocol)


@dataclass
class _Row:
    """One packed sequence: a prompt and the options scored after it."""

    context: list[int]
    answers: list[tuple[list[int], float]]  # (tokens, loss weight)

    @property
    def length(self) -> int:
        return len(self.context) + sum(len(a) for a, _ in self.answers)


def _pack(rows: list[_Row], pad: int, shared: bool) -> Batch:
    """Right-padded batch; with ``shared``, all options of an item follow one copy of its prompt.

    Shared layout: [prompt | option 1 | option 2 | ...]. Option tokens see the prompt and
    their own earlier tokens only (a 4D boolean mask), and their positions continue from
    the prompt, so each option is computed exactly as if it followed the prompt alone; the
    prompt's states are computed once instead of once per option.
    """
    width = max(r.length for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), 1, width, width), dtype=torch.bool)
    pos_rows: list[int] = []
    pos_cols: list[int] = []
    targets: list[int] = []
    option: list[int] = []
    weights: list[float] = []
    for r, row in enumerate(rows):
        P = len(row.context)
        ids[r, :P] = torch.tensor(row.context)
        positions[r, :P] = torch.arange(P)
        mask[r, 0, :P, :P] = torch.ones(P, P, dtype=torch.bool).tril()
        start = P
        for answer, weight in row.answers:
            A = len(answer)
            ids[r, start : start + A] = torch.tensor(answer)
            positions[r, start : start + A] = torch.arange(P, P + A)
            mask[r, 0, start : start + A, :P] = True
            mask[r, 0, start : start + A, start : start + A] = torch.ones(A, A, dtype=torch.bool).tril()
            # token t of the option is predicted by the state before it: the prompt's last
            # token for t = 0, else the option's own token t - 1
            pos_rows += [r] * A
            pos_cols += [P - 1] + list(range(start, start + A - 1))
            targets += answer
            option += [len(weights)] * A
            weights.append(weight)
            start += A
        for t in range(start, width):  # padding attends to itself only (a row is never all-masked)
            mask[r, 0, t, t] = True
    payload = {"rows": torch.tensor(pos_rows), "cols": torch.tensor(pos_cols), "targets": torch.tensor(targets),
               "option": torch.tensor(option), "weights": torch.tensor(weights, dtype=torch.float64)}
    forward = {"attention_mask": mask, "position_ids": positions} if shared else {}
    return Batch(ids, payload, forward)


