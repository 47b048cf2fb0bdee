"""What a heal is: :class:`~depthprune.healing.config.HealConfig`, its defaults and where each comes from, and its checks.

The defaults follow the peers that ship a recovery step after depth pruning:

* Shortened LLaMA (Kim et al. 2024, arXiv 2402.02834, its ``lora`` script) and LLM-Pruner (Ma et al. 2023,
  arXiv 2305.11627, ``post_training.py``): LoRA rank 8, alpha 16, dropout 0.05, on all seven projections of
  every block (q, k, v, o, gate, up, down), learning rate 1e-4, AdamW, 2 epochs of Alpaca-cleaned
  (~50k samples), cut at 256 tokens.
* Ours: a fixed token budget in place of their epochs, the same for every pruned model of a grid, so heals
  compare; a cosine schedule with 5% warm-up (their 100 warm-up steps are most of a CPU heal's steps); micro-
  batches of 4 windows; float32 on every CPU, so that two machines heal the same numbers, whatever their bf16
  kernels (docs/healing.md).

Every field is an option (``depthprune heal --rank ...``). A bad value fails when the config is built, before
any model loads: the CLI maps the :class:`ValueError` to exit 2.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from depthprune.common.params import check_choice, check_ints

#: how the adapters learn: ``lora``, the peers' language-model loss on the healing text; ``lora-hidden``, the same
#: adapters trained to match the dense model's last hidden states on the same windows (issue 61's second method;
#: the output head is skipped, and the dense targets are computed once per model: depthprune.healing.pruned)
METHODS = ("lora", "lora-hidden")
#: the method a grid's heals use and the healing claims read; another method's heals are measured beside it
MAIN_METHOD = "lora"

#: the token budget each profile's heals use, chosen by the healing curve's rule (DESIGN.md, "Healing"); a
#: profile missing here has none chosen yet, and a heal on it must name its budget
BUDGETS: dict[str, int] = {}
SCHEDULES = ("cosine", "constant")

#: where each default comes from (printed by ``depthprune heal --help`` and docs/healing.md)
SOURCES: dict[str, str] = {
    "method": "lora: the peers' language-model loss (Shortened LLaMA, LLM-Pruner); lora-hidden: ours, the dense "
              "model's last hidden states as the target (mean squared error over the targets' mean square)",
    "rank": "Shortened LLaMA, LLM-Pruner: r=8",
    "alpha": "Shortened LLaMA, LLM-Pruner: lora_alpha=16",
    "dropout": "Shortened LLaMA, LLM-Pruner: lora_dropout=0.05",
    "target_modules": "Shortened LLaMA, LLM-Pruner: all seven projections (q,k,v,o,gate,up,down) of every block",
    "lr": "Shortened LLaMA, LLM-Pruner: learning rate 1e-4",
    "seq_len": "Shortened LLaMA, LLM-Pruner: cutoff_len 256",
    "schedule": "ours: cosine decay (the peers' Trainer defaults to linear)",
    "warmup_ratio": "ours: 5% of the steps (the peers' fixed 100 warm-up steps exceed a CPU heal's steps)",
    "tokens": "ours: a fixed token budget in place of the peers' 2 epochs; chosen by the healing curve's rule",
    "batch_size": "ours: 4 windows a step (the peers: 64 samples a step, on GPUs)",
}


@dataclass(frozen=True)
class HealConfig:
    """One heal's settings; its :meth:`~depthprune.healing.config.HealConfig.to_dict` is recorded in every healed result."""

    tokens: int  # training tokens seen in all (the budget); windows are drawn until it is spent
    method: str = "lora"
    rank: int = 8
    alpha: int = 16
    dropout: float = 0.05
    #: module names (the last part, e.g. "q_proj") of the blocks' linear layers to adapt; empty: all of them
    target_modules: tuple[str, ...] = field(default_factory=tuple)
    lr: float = 1e-4
    schedule: str = "cosine"
    warmup_ratio: float = 0.05
    seq_len: int = 256
    batch_size: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        owner = "healing"
        check_choice(owner, "method", self.method, METHODS)
        check_choice(owner, "schedule", self.schedule, SCHEDULES)
        check_ints(owner, self, {"tokens": 1, "rank": 1, "alpha": 1, "seq_len": 2, "batch_size": 1, "seed": 0})
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{owner}: dropout must be in [0, 1), got {self.dropout!r}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"{owner}: warmup_ratio must be in [0, 1), got {self.warmup_ratio!r}")
        if not self.lr > 0.0:
            raise ValueError(f"{owner}: lr must be > 0, got {self.lr!r}")
        object.__setattr__(self, "target_modules", tuple(self.target_modules))

    @property
    def steps(self) -> int:
        """Optimizer steps: the budget in whole micro-batches (at least one)."""
        return max(1, -(-self.tokens // (self.seq_len * self.batch_size)))

    @property
    def tag(self) -> str:
        """The heal as a result's identity names it: method, budget and seed (the rest is in the config)."""
        return f"{self.method}-t{self.tokens}-s{self.seed}"

    @staticmethod
    def parse_tag(tag: str) -> tuple[str, int, int]:
        """A :attr:`~depthprune.healing.config.HealConfig.tag`'s method, budget and seed (a method's name may hold
        ``-``: ``lora-hidden-t4096-s0``)."""
        rest, _, seed = tag.rpartition("-s")
        method, _, tokens = rest.rpartition("-t")
        if not method or not tokens.isdigit() or not seed.isdigit():
            raise ValueError(f"healing: {tag!r} is not a heal's tag (<method>-t<tokens>-s<seed>)")
        return method, int(tokens), int(seed)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["target_modules"] = list(self.target_modules)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HealConfig:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"healing: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        values = dict(data)
        if "target_modules" in values:
            values["target_modules"] = tuple(values["target_modules"])
        return cls(**values)
