"""The evaluation protocol: which tasks, which metrics, which windows. A data fact that the profiles set and
the evaluation reads, so it lives below both (:mod:`depthprune.data.profiles`, :mod:`depthprune.evaluation`).
"""

from __future__ import annotations

from dataclasses import dataclass

ZERO_SHOT_TASKS = ("hellaswag", "winogrande", "arc_easy", "arc_challenge", "piqa", "boolq")
#: lm-eval models zero_shot can run: ours (shared prefixes, the default) and stock HFLM
ADAPTERS = ("shared-prefix", "hflm")
HEADLINE_METRIC = {"hellaswag": "acc_norm", "arc_challenge": "acc_norm"}  # acc otherwise


def headline(task: str) -> str:
    return HEADLINE_METRIC.get(task, "acc")


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how; every field is part of the cache key and the result.

    The defaults are the paper's protocol; a profile's ``eval_config()`` overrides them.
    ``adapter`` (ours) chooses the lm-eval model (:data:`ADAPTERS`); it is keyed like
    ``batch_size``: both change only float rounding, and a cached entry says which ran.
    """

    tasks: tuple[str, ...] = ZERO_SHOT_TASKS
    lambada: bool = True
    perplexity: tuple[str, ...] = ("wikitext2", "c4")
    seq_len: int = 2048
    c4_windows: int = 256
    batch_size: int = 8
    limit: int | None = None  # lm-eval items per task (None = all)
    adapter: str = "shared-prefix"  # lm-eval model: see ADAPTERS

    def __post_init__(self) -> None:
        if self.adapter not in ADAPTERS:
            raise ValueError(f"unknown adapter {self.adapter!r}; allowed: {', '.join(ADAPTERS)}")
