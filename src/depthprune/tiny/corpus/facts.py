"""Facts as sentences, each in several phrasings (a person, a species, a town), and the calendar
words (weekdays, months) the genres share: the pieces every other genre is written from.
"""

from __future__ import annotations

import random

from ..items.wording import an, cap, pets_phrase
from ..knowledge import (
    CLASSES,
    JOBS,
    REGION_TEXT,
)
from ..world import Person, World

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


# ---------------------------------------------------------------------------
# Facts as sentences (several phrasings each)
# ---------------------------------------------------------------------------
def person_sentences(world: World, p: Person, rng: random.Random) -> list[str]:
    t = world.town_of(p)
    s = [
        rng.choice([f"{p.name} lives in {t.name}.", f"{p.name} makes {p.pos} home in {t.name}.",
                    f"{p.first} lives in the {t.size} of {t.name}."]),
        rng.choice([f"{cap(p.sub)} works as {an(p.job)}.", f"{p.first} is {an(p.job)} by trade.",
                    f"By trade {p.first} is {an(p.job)}, and {p.sub} works at {JOBS[p.job]['place']}."]),
        rng.choice([f"{p.first} is {p.age} years old.", f"{cap(p.sub)} is {p.age}.",
                    f"{p.first} was {p.age} on {p.pos} last birthday."]),
        rng.choice([f"{cap(p.pos)} favourite colour is {p.colour}.", f"{p.first} likes {p.colour} best of all colours."]),
        rng.choice([f"{p.first} has {pets_phrase(p)}.", f"At home {p.sub} keeps {pets_phrase(p)}."]),
    ]
    if p.birth_town is not None and p.birth_town != p.town:
        s.append(f"{cap(p.sub)} was born in {world.towns[p.birth_town].name}.")
    if p.sibling is not None:
        q = world.people[p.sibling]
        rel = "sister" if q.gender == "f" else "brother"
        s.append(rng.choice([f"{cap(p.pos)} {rel} is {q.name}.", f"{p.first} has a {rel} called {q.first}."]))
    if p.friend is not None:
        q = world.people[p.friend]
        s.append(rng.choice([f"{cap(p.pos)} best friend is {q.name}, {an(q.job)}.",
                             f"{p.first} is good friends with {q.name}."]))
    for k, names in p.pet_names.items():
        if names:
            s.append(f"{cap(p.pos)} {k} is called {names[0]}.")
    return s


def species_sentences(sp, rng: random.Random) -> list[str]:
    c = CLASSES[sp.cls]
    return [
        rng.choice([f"The {sp.name} is a {sp.size} {sp.cls}.", f"The {sp.name} is a kind of {sp.cls}.",
                    f"A {sp.name} is one of the {c['plural']}."]),
        f"It is found in the {sp.region}, and most are {sp.colour}.",
        f"The {sp.name} eats {sp.diet}.",
        rng.choice([f"Like all {c['plural']}, the {sp.name} is covered in {c['covering']}.",
                    f"Its body is covered in {c['covering']}."]),
        rng.choice([f"It lives {c['lives']} and gets around by {c['moves']}.",
                    f"The {sp.name} moves by {c['moves']}."]),
        f"It has {c['limbs']} and breathes with {c['breathes']}.",
        f"The {sp.name} {c['young']}.",
    ]


def town_sentences(t, rng: random.Random) -> list[str]:
    return [
        rng.choice([f"{t.name} is a {t.size} in the {t.region}.", f"{t.name} lies in {REGION_TEXT[t.region]}."]),
        f"It stands on the river {t.river}.",
        rng.choice([f"About {t.population} people live there.", f"It has a population of about {t.population}."]),
        f"{t.name} was founded in the year {t.founded}.",
        rng.choice([f"It is famous for its {t.product}.", f"The {t.size} is best known for its {t.product}."]),
    ]
