"""The healing room: a pruned model fine-tuned to recover, the suite's question after the paper's.

* :mod:`~depthprune.healing.config` -- :class:`~depthprune.healing.config.HealConfig`: what a heal is, its defaults and their sources;
* :mod:`~depthprune.healing.lora` -- :func:`heal`: LoRA through PEFT, trained over a token budget, merged
  and checked against the unmerged model.
"""

from depthprune.healing.config import HealConfig
from depthprune.healing.lora import HealReport, MergeMismatch, heal

__all__ = ["HealConfig", "HealReport", "MergeMismatch", "heal"]
