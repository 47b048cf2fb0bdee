"""Question-answer text: single-hop and multi-hop questions (person -> town -> region, person ->
sibling -> job), comparisons and counts, with the facts in the context or only in other documents.
"""

from __future__ import annotations

import random

from ..items.wording import an, pets_phrase, two_people
from ..knowledge import (
    CLASS_ESCAPE,
    CLASS_NAMES,
    CLASSES,
    CONTAINER_SIZE,
    ITEM_SIZE,
    JOBS,
    MATERIAL_NAMES,
    MATERIALS,
    NUMBER_WORDS,
    TOOL_NAMES,
    TOOLS,
)
from ..world import World


# ---------------------------------------------------------------------------
# Question-answer text
# ---------------------------------------------------------------------------
def qa_pairs(world: World, rng: random.Random, split: str) -> list[tuple[str, str]]:
    p = rng.choice(world.pool(split))
    t = world.town_of(p)
    out = []
    kind = rng.random()
    if kind < 0.35:  # about a person, facts only in other documents (recall + multi-hop)
        out += [(f"Where does {p.name} live?", t.name),
                (f"What is {p.name}'s job?", an(p.job)),
                (f"How old is {p.name}?", f"{p.age} years old"),
                (f"In which part of the country does {p.name} live?", f"in the {t.region}"),
                (f"How many pets does {p.name} have?", NUMBER_WORDS[p.n_pets] if p.n_pets < 13 else str(p.n_pets)),
                (f"On which river is the home town of {p.name}?", f"the river {t.river}")]
        if p.sibling is not None:
            q = world.people[p.sibling]
            out += [(f"What does {p.name}'s {'sister' if q.gender == 'f' else 'brother'} do for a living?", f"{q.first} is {an(q.job)}"),
                    (f"Where does {p.name}'s {'sister' if q.gender == 'f' else 'brother'} live?", world.town_of(q).name)]
        if p.friend is not None:
            q = world.people[p.friend]
            older = p if p.age > q.age else q
            out.append((f"Who is older, {p.first} or {q.first}?", older.first if p.age != q.age else "they are the same age"))
    elif kind < 0.7:  # facts in context, then questions (reading, hops, comparison, counting)
        a, b = two_people(world, rng, split)
        ta, tb = world.town_of(a), world.town_of(b)
        ctx = (f"{a.first} is {a.age} and lives in {ta.name}, which is in the {ta.region}. {b.first} is {b.age} and "
               f"lives in {tb.name}, which is in the {tb.region}. {a.first} has {pets_phrase(a)}. "
               f"{b.first} has {pets_phrase(b)}.")
        out.append(("Read this: " + ctx, "OK"))
        older = a if a.age > b.age else b
        younger = b if older is a else a
        out += [(f"Who is older, {a.first} or {b.first}?", older.first if a.age != b.age else "they are the same age"),
                ("Who is younger?", younger.first if a.age != b.age else "neither"),
                (f"In which part of the country does {b.first} live?", f"the {tb.region}"),
                (f"How many pets does {a.first} have in all?", NUMBER_WORDS[a.n_pets]),
                (f"How many cats do {a.first} and {b.first} have together?", NUMBER_WORDS[a.pets['cat'] + b.pets['cat']]),
                (f"Does {b.first} have a dog?", "yes" if b.pets["dog"] else "no")]
    else:  # general knowledge and rules
        sp = rng.choice(world.species_pool(split))
        c = CLASSES[sp.cls]
        m = rng.choice(MATERIAL_NAMES)
        tool = rng.choice(TOOL_NAMES)
        out += [(f"What kind of animal is the {sp.name}?", an(sp.cls)),
                (f"What is the {sp.name} covered in?", c["covering"]),
                (f"How does the {sp.name} move?", f"by {c['moves']}"),
                (f"What does the {sp.name} eat?", sp.diet),
                (f"Does {m} float on water?", "yes" if MATERIALS[m]["floats"] else "no"),
                (f"Will {m} burn in a fire?", "yes" if MATERIALS[m]["burns"] else "no"),
                (f"What is {TOOLS[tool]['a']} used for?", f"to {TOOLS[tool]['use']}"),
                (f"Which tool would you use to {TOOLS[tool]['goals'][rng.randrange(2)]}?", TOOLS[tool]["a"]),
                (f"Where does {an(p.job)} work?", JOBS[p.job]["place"])]
        x, y = rng.sample(CLASS_NAMES, 2)
        out.append((f"A {sp.name} is {an(sp.cls)}. What does it have?", c["limbs"]))
        it, co = rng.choice(list(ITEM_SIZE)), rng.choice(list(CONTAINER_SIZE))
        out.append((f"Will {an(it)} fit into {an(co)}?", "yes" if ITEM_SIZE[it] < CONTAINER_SIZE[co] else "no"))
        i1, i2 = rng.sample(list(ITEM_SIZE), 2)
        if ITEM_SIZE[i1] != ITEM_SIZE[i2]:
            out.append((f"Which is bigger, {an(i1)} or {an(i2)}?", an(i1 if ITEM_SIZE[i1] > ITEM_SIZE[i2] else i2)))
        out.append((f"What does {an(x)} do when a cat comes near?", f"it {CLASS_ESCAPE[x]}"))
        out.append((f"Which is covered in {CLASSES[x]['covering']}: {an(x)} or {an(y)}?", an(x)))
    rng.shuffle(out) if rng.random() < 0.3 and not out[0][0].startswith("Read") else None
    return out


def doc_qa(world: World, rng: random.Random, split: str) -> str:
    out = []
    for _ in range(rng.randint(2, 3)):
        for q, a in qa_pairs(world, rng, split):
            if q.startswith("Read this: "):
                out.append(q[len("Read this: "):])
            else:
                out.append(f"Q: {q}\nA: {a}" if rng.random() < 0.5 else f"Question: {q}\nAnswer: {a}")
    return "\n\n".join(out)
