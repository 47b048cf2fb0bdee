"""The genre mixes: which genre each document is drawn from (the base and continued-training mixes),
the document stream, and the C4-like fixture documents.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ..world import World
from .articles import doc_article
from .narrative import doc_journey, doc_life, doc_market, doc_roster
from .qa import doc_qa
from .task_text import doc_commonsense, doc_tasks
from .web import doc_web

# ---------------------------------------------------------------------------
# Mixes
# ---------------------------------------------------------------------------
GENRES: dict[str, Callable[[World, random.Random, str], str]] = {
    "life": doc_life, "journey": doc_journey, "market": doc_market, "roster": doc_roster, "article": doc_article,
    "web": doc_web, "qa": doc_qa, "tasks": doc_tasks, "commonsense": doc_commonsense,
}

# Mix weights are in *documents*; genres differ in length (tasks/articles are long).
MIXES: dict[str, dict[str, float]] = {
    # base pretraining mix (tiny-llama3, tiny-qwen3)
    "base": {"life": 0.12, "journey": 0.10, "market": 0.06, "roster": 0.08, "article": 0.15, "web": 0.12,
             "qa": 0.13, "tasks": 0.14, "commonsense": 0.10},
    # continued-training mix for tiny-llama3.1: more QA, task and instruction text
    "continue": {"life": 0.08, "journey": 0.09, "market": 0.06, "roster": 0.06, "article": 0.11, "web": 0.09,
                 "qa": 0.17, "tasks": 0.19, "commonsense": 0.15},
}


def documents(world: World, n: int, seed: int, mix: str = "base", split: str = "train"):
    """Yield ``n`` documents of the given mix (deterministic in ``seed``)."""
    rng = random.Random(f"corpus-{world.seed}-{seed}-{mix}-{split}")
    weights = MIXES[mix]
    names = list(weights)
    w = [weights[k] for k in names]
    for _ in range(n):
        g = rng.choices(names, weights=w)[0]
        yield GENRES[g](world, rng, split)


def c4_document(world: World, rng: random.Random, split: str) -> str:
    """A C4-like web document (long, varied; mostly web register)."""
    r = rng.random()
    if r < 0.6:
        return doc_web(world, rng, split)
    parts: list[str] = []
    while len(" ".join(parts).split()) < 170:
        parts.append(rng.choice([doc_life, doc_journey, doc_market, lambda w, g, s: doc_article(w, g, s, 0.0)])(
            world, rng, split))
    return "\n\n".join(parts)
