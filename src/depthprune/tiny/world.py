"""A small, deterministic world for the tiny model family.

Why a world and not a bag of sentences
--------------------------------------
Depth-pruning results on a model are only meaningful if the model has learned
something that needs depth: binding entities to properties across a passage,
following a relation and then another (multi-hop), comparing quantities,
counting, and applying general rules (a *kind* of animal inherits the traits of
its class; a tool serves a purpose; a material floats or sinks).  A corpus of
independent n-gram templates would be memorised by a shallow model and every
layer would look redundant.  So this module defines a structured world -- people
with jobs, towns, families, pets and ages; towns in regions on rivers; invented
animal species belonging to classes with inherited traits; materials with
physical properties; tools with purposes; everyday procedures ("scripts") --
and :mod:`depthprune.tiny.corpus` renders it as prose, encyclopedia articles,
web pages and question-answer text.  The general knowledge itself (jobs,
procedures, animal classes, materials, tools) is a set of fixed tables in
:mod:`depthprune.tiny.knowledge`; this module draws the seed's entities.

Everything here is authored for this project (no copied text) and is a pure
function of the seed: ``World(seed)`` always builds the same world.

Held-out structure
------------------
People and species are split into a *train* part (appears in the training
corpus) and a *held-out* part (appears only in evaluation fixtures), so the
evaluation tasks test reading and rule application on unseen entities rather
than recall of memorised sentences.  General knowledge (class traits, materials,
tools, procedures) is shared, as in real pretraining; where the fixtures need
it, phrasings ("frames") are split too (see ``PIQA_FRAMES``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .knowledge import (
    CLASS_ESCAPE,
    CLASS_NAMES,
    CLASSES,
    COLOURS,
    COMPARISONS,
    CONTAINER_SIZE,
    DIETS,
    FOODS,
    ITEM_SIZE,
    JOB_NAMES,
    JOBS,
    MATERIAL_ADJ,
    MATERIAL_NAMES,
    MATERIALS,
    NUMBER_WORDS,
    OBJECTS,
    PET_KINDS,
    PRODUCTS,
    PROPERTY_TEXT,
    REGION_TEXT,
    REGIONS,
    SCRIPT_JOB,
    SCRIPTS,
    SIZES,
    SOCIAL,
    TOOL_NAMES,
    TOOLS,
    TOWN_SIZES,
    TRAIT_QUESTION,
    UNIQUE_TRAITS,
)

# the tables are re-exported: callers that read them from here keep working
__all__ = ["CLASSES", "CLASS_ESCAPE", "CLASS_NAMES", "COLOURS", "COMPARISONS", "CONTAINER_SIZE", "DIETS", "FOODS",
           "ITEM_SIZE", "JOBS", "JOB_NAMES", "MATERIALS", "MATERIAL_ADJ", "MATERIAL_NAMES", "NUMBER_WORDS", "OBJECTS",
           "PET_KINDS", "PRODUCTS", "PROPERTY_TEXT", "Person", "REGIONS", "REGION_TEXT", "SCRIPTS", "SCRIPT_JOB",
           "SIZES", "SOCIAL", "Species", "TOOLS", "TOOL_NAMES", "TOWN_SIZES", "TRAIT_QUESTION", "Town",
           "UNIQUE_TRAITS", "World"]

# ---------------------------------------------------------------------------
# Name generation (invented names, so nothing is copied and held-out entities
# are genuinely unseen strings).
# ---------------------------------------------------------------------------
_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "gr", "kr", "st", "th", "sh", "tr", "fl", "j", "w"]
_VOWELS = ["a", "e", "i", "o", "u", "ae", "ia", "ei", "ou"]
_CODAS = ["", "", "", "n", "l", "r", "s", "m", "th", "k", "d", "nd", "rn", "st"]
_TOWN_A = ["Bren", "Ost", "Wil", "Har", "Cal", "Dun", "Fen", "Mar", "Rook", "Ash", "Thorn",
           "Elm", "Gled", "Kell", "Lind", "Pel", "Quar", "Sel", "Tarn", "Ver", "Brack", "Cor",
           "Dal", "Eyr", "Gort", "Hol", "Iver", "Lorn", "Mund", "Nor", "Pen", "Rav", "Sten", "Ul", "Wend"]
_TOWN_B = ["vale", "moor", "ford", "by", "wick", "stead", "holm", "bridge", "haven", "mouth",
           "field", "ton", "dale", "mere", "cross"]


def _syllable(rng: random.Random, coda: bool = True) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + (rng.choice(_CODAS) if coda else "")


def _word(rng: random.Random, n: int) -> str:
    s = "".join(_syllable(rng, coda=(i == n - 1) or rng.random() < 0.3) for i in range(n))
    return s


# ---------------------------------------------------------------------------
# Entities
# ---------------------------------------------------------------------------
@dataclass
class Town:
    name: str
    region: str
    river: str
    product: str
    size: str
    population: int
    founded: int


@dataclass
class Species:
    name: str
    cls: str
    colour: str
    size: str
    diet: str
    region: str
    split: str = "train"

    @property
    def traits(self) -> dict[str, str]:
        return CLASSES[self.cls]


@dataclass
class Person:
    idx: int
    first: str
    last: str
    gender: str  # "f" / "m"
    age: int
    town: int
    job: str
    colour: str
    pets: dict[str, int]
    pet_names: dict[str, list[str]] = field(default_factory=dict)
    sibling: int | None = None
    friend: int | None = None
    birth_town: int | None = None
    split: str = "train"

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def sub(self) -> str:
        return "she" if self.gender == "f" else "he"

    @property
    def obj(self) -> str:
        return "her" if self.gender == "f" else "him"

    @property
    def pos(self) -> str:
        return "her" if self.gender == "f" else "his"

    @property
    def n_pets(self) -> int:
        return sum(self.pets.values())


class World:
    """The whole world, a pure function of ``seed``.

    ``people`` / ``species`` carry a ``split`` of ``"train"`` or ``"heldout"``.
    """

    def __init__(self, seed: int = 0, n_towns: int = 40, n_people: int = 1600,
                 n_species: int = 150, heldout_frac: float = 0.25):
        self.seed = seed
        rng = random.Random(f"world-{seed}")
        used: set[str] = set()

        def fresh(make):
            for _ in range(1000):
                w = make()
                if w not in used and len(w) >= 3:
                    used.add(w)
                    return w
            raise RuntimeError("name space exhausted")

        self.towns: list[Town] = []
        for i in range(n_towns):
            name = fresh(lambda: rng.choice(_TOWN_A) + rng.choice(_TOWN_B))
            size = rng.choice(TOWN_SIZES)
            pop = {"village": rng.randint(3, 9) * 100, "town": rng.randint(2, 9) * 1000,
                   "city": rng.randint(2, 9) * 10000}[size]
            self.towns.append(Town(name=name, region=REGIONS[i % len(REGIONS)],
                                   river=fresh(lambda: _word(rng, 2).capitalize()),
                                   product=rng.choice(PRODUCTS), size=size, population=pop,
                                   founded=rng.randint(40, 190) * 10))
        self.species: list[Species] = []
        for i in range(n_species):
            name = fresh(lambda: _word(rng, rng.choice([2, 2, 3])))
            self.species.append(Species(name=name, cls=CLASS_NAMES[i % len(CLASS_NAMES)],
                                        colour=rng.choice(COLOURS), size=rng.choice(SIZES),
                                        diet=rng.choice(DIETS), region=rng.choice(REGIONS)))
        rng.shuffle(self.species)
        n_ho = int(round(heldout_frac * n_species))
        for s in self.species[:n_ho]:
            s.split = "heldout"

        surnames = [fresh(lambda: _word(rng, rng.choice([2, 3])).capitalize()) for _ in range(n_people // 3)]
        self.people: list[Person] = []
        for i in range(n_people):
            first = fresh(lambda: _word(rng, 2).capitalize())
            p = Person(idx=i, first=first, last=rng.choice(surnames), gender=rng.choice("fm"),
                       age=rng.randint(18, 80), town=rng.randrange(n_towns), job=rng.choice(JOB_NAMES),
                       colour=rng.choice(COLOURS),
                       pets={k: rng.choice([0, 0, 1, 1, 2, 3, 4]) for k in PET_KINDS})
            p.birth_town = rng.randrange(n_towns) if rng.random() < 0.6 else p.town
            p.pet_names = {k: [fresh(lambda: _word(rng, 2).capitalize()) for _ in range(min(v, 2))]
                           for k, v in p.pets.items()}
            self.people.append(p)
        order = list(range(n_people))
        rng.shuffle(order)
        for j in order[: int(round(heldout_frac * n_people))]:
            self.people[j].split = "heldout"
        # relations stay inside a split so held-out people are never mentioned in training
        for split in ("train", "heldout"):
            pool = [p for p in self.people if p.split == split]
            for p in pool:
                same = [q for q in pool if q.last == p.last and q.idx != p.idx]
                p.sibling = rng.choice(same).idx if same else None
                q = rng.choice(pool)
                p.friend = q.idx if q.idx != p.idx else None

        self._heldout_names = {p.first for p in self.pool("heldout")} | {p.last for p in self.pool("heldout")} \
            | {s.name for s in self.species_pool("heldout")}
        self._all_names = used

    # -- fresh (one-off) entities -----------------------------------------
    # Training text mentions registry people (whose facts recur and can be
    # memorised) and, with probability FRESH_P, one-off people and species
    # that never recur.  One-off entities make memorisation useless, so the
    # model must read the context: bind a name to a job, copy an object or a
    # name from earlier in the passage, apply a class rule to a new species.
    # Their names never collide with held-out names.
    FRESH_P = 0.6

    def _fresh_name(self, rng: random.Random, n: int) -> str:
        while True:
            w = _word(rng, n)
            if w.capitalize() not in self._heldout_names and w not in self._heldout_names and len(w) >= 3:
                return w

    def fresh_person(self, rng: random.Random) -> Person:
        p = Person(idx=-1, first=self._fresh_name(rng, 2).capitalize(),
                   last=self._fresh_name(rng, rng.choice([2, 3])).capitalize(), gender=rng.choice("fm"),
                   age=rng.randint(18, 80), town=rng.randrange(len(self.towns)), job=rng.choice(JOB_NAMES),
                   colour=rng.choice(COLOURS), pets={k: rng.choice([0, 0, 1, 1, 2, 3, 4]) for k in PET_KINDS},
                   split="fresh")
        p.birth_town = rng.randrange(len(self.towns)) if rng.random() < 0.6 else p.town
        p.pet_names = {k: [self._fresh_name(rng, 2).capitalize() for _ in range(min(v, 2))] for k, v in p.pets.items()}
        return p

    def fresh_species(self, rng: random.Random) -> Species:
        return Species(name=self._fresh_name(rng, rng.choice([2, 2, 3])), cls=rng.choice(CLASS_NAMES),
                       colour=rng.choice(COLOURS), size=rng.choice(SIZES), diet=rng.choice(DIETS),
                       region=rng.choice(REGIONS), split="fresh")

    def pick(self, rng: random.Random, split: str) -> Person:
        """A person for in-context text: held-out split -> a held-out person;
        train split -> a one-off person with probability FRESH_P, else a registry person."""
        if split == "train" and rng.random() < self.FRESH_P:
            return self.fresh_person(rng)
        return rng.choice(self.pool(split))

    def pick_species(self, rng: random.Random, split: str) -> Species:
        if split == "train" and rng.random() < self.FRESH_P:
            return self.fresh_species(rng)
        return rng.choice(self.species_pool(split))

    # -- helpers ---------------------------------------------------------
    def pool(self, split: str) -> list[Person]:
        return [p for p in self.people if p.split == split]

    def species_pool(self, split: str) -> list[Species]:
        return [s for s in self.species if s.split == split]

    def town_of(self, p: Person) -> Town:
        return self.towns[p.town]
