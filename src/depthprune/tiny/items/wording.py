"""Phrasing shared by the item generators: capitals, articles, counts in words, a person's pets,
a procedure step in a person's voice, two different people.
"""

from __future__ import annotations

import random

from ..knowledge import NUMBER_WORDS
from ..world import Person, World

LETTERS = ["A", "B", "C", "D"]


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def an(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def num(n: int, rng: random.Random) -> str:
    """A count as a word or digits (both appear in text)."""
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) and rng.random() < 0.7 else str(n)


def pets_phrase(p: Person, rng: random.Random | None = None) -> str:
    parts = []
    for k in ("cat", "dog", "bird"):
        n = p.pets[k]
        if n:
            parts.append(f"{NUMBER_WORDS[n]} {k}{'s' if n > 1 else ''}")
    if not parts:
        return "no pets"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def step(text: str, p: Person) -> str:
    return text.format(pos=p.pos)


def two_people(world: World, rng: random.Random, split: str) -> tuple[Person, Person]:
    a = world.pick(rng, split)
    while True:
        b = world.pick(rng, split)
        if b.first != a.first:
            return a, b
