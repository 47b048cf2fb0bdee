"""Task-style text: benchmark items rendered with their answers, and Commonsense-170k instruction
records (plain or in the Alpaca template), as real pretraining data also holds such text.
"""

from __future__ import annotations

import random

from ..items.reading import lambada
from ..items.records import any_item, commonsense, render_answered
from ..world import World

# ---------------------------------------------------------------------------
# Task-style text
# ---------------------------------------------------------------------------
TASK_KINDS = ["hellaswag", "winogrande", "arc_easy", "arc_challenge", "piqa", "boolq", "lambada", "siqa", "obqa"]


def doc_tasks(world: World, rng: random.Random, split: str) -> str:
    out = []
    for _ in range(rng.randint(4, 7)):
        kind = rng.choice(TASK_KINDS)
        item = lambada(world, rng, split) if kind == "lambada" else any_item(kind, world, rng, split)
        out.append(render_answered(kind, item))
    return "\n\n".join(out)


ALPACA = ("Below is an instruction that describes a task. Write a response that appropriately completes "
          "the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n{output}")


def render_commonsense(rec: dict, rng: random.Random) -> str:
    if rng.random() < 0.3:
        return ALPACA.format(**rec)
    return f"{rec['instruction']}\n\n{rec['output']}"


def doc_commonsense(world: World, rng: random.Random, split: str) -> str:
    return "\n\n".join(render_commonsense(commonsense(world, rng, split), rng) for _ in range(rng.randint(2, 4)))
