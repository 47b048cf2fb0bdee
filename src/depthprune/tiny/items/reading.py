"""Reading items: BoolQ (check a claim against a passage) and LAMBADA (the last word, fixed by
something said sentences earlier). Both hand the model a passage it must read.
"""

from __future__ import annotations

import random

from ..knowledge import (
    CLASS_NAMES,
    CLASSES,
    JOB_NAMES,
    JOBS,
    MATERIAL_NAMES,
    MATERIALS,
    OBJECTS,
    PROPERTY_TEXT,
    REGIONS,
    TOOL_NAMES,
    TOOLS,
    UNIQUE_TRAITS,
)
from ..world import World
from .wording import an, cap, pets_phrase, two_people


# ---------------------------------------------------------------------------
# BoolQ
# ---------------------------------------------------------------------------
def boolq(world: World, rng: random.Random, split: str, answer: bool | None = None) -> dict:
    ans = rng.random() < 0.5 if answer is None else answer
    kind = rng.choices(["person", "species", "town", "material", "tool", "class"],
                       weights=[0.25, 0.2, 0.2, 0.15, 0.1, 0.1])[0]
    if kind == "material":
        m = rng.choice(MATERIAL_NAMES)
        props = list(PROPERTY_TEXT)
        rng.shuffle(props)
        told = props[:3]
        passage = (f"{cap(m)} is a material that people have used for a very long time. "
                   + " ".join(f"{cap(m)} {PROPERTY_TEXT[k][0] if MATERIALS[m][k] else PROPERTY_TEXT[k][1]}." for k in told)
                   + f" Many things in the home are made of {m}.")
        k = rng.choice(props[:5])
        val = MATERIALS[m][k]
        question = {"floats": f"does {m} float on water", "burns": f"will {m} burn in a fire",
                    "magnetic": f"is {m} pulled by a magnet", "conducts": f"does {m} carry electricity",
                    "transparent": f"can light pass through {m}", "breaks": f"does {m} break easily when dropped",
                    "soft": f"is {m} soft to touch"}[k]
        return {"question": question, "passage": passage, "label": int(val)}
    if kind == "tool":
        t = rng.choice(TOOL_NAMES)
        use = TOOLS[t]["use"] if ans else TOOLS[rng.choice([o for o in TOOL_NAMES if o != t])]["use"]
        passage = (f"{cap(TOOLS[t]['a'])} is found in most homes and workshops. People have used it for "
                   f"hundreds of years, and it is easy to find at any market.")
        return {"question": f"is {TOOLS[t]['a']} used to {use}", "passage": passage, "label": int(ans)}
    if kind == "class":
        c = rng.choice(CLASS_NAMES)
        t = CLASSES[c]
        trait = rng.choice(UNIQUE_TRAITS[:4])
        other = rng.choice([o for o in CLASS_NAMES if o != c])
        v = t[trait] if ans else CLASSES[other][trait]
        passage = (f"{cap(t['plural'])} are one of the main classes of animals. There are many kinds of "
                   f"{t['plural']}, and they can be found in every part of the country.")
        question = {"lives": f"do {t['plural']} live {v}", "covering": f"are {t['plural']} covered in {v}",
                    "moves": f"do {t['plural']} get around by {v}", "limbs": f"do {t['plural']} have {v}"}[trait]
        return {"question": question, "passage": passage, "label": int(ans)}
    if kind == "person":
        p = world.pick(rng, split)
        t = world.town_of(p)
        passage = (f"{p.name} is {an(p.job)} who lives in {t.name}, a {t.size} in the {t.region}. "
                   f"{cap(p.sub)} is {p.age} years old and works at {JOBS[p.job]['place']}. "
                   f"{cap(p.sub)} has {pets_phrase(p)}, and {p.pos} favourite colour is {p.colour}.")
        attr = rng.choice(["job", "town", "colour", "pet", "older"])
        if attr == "job":
            v = p.job if ans else rng.choice([j for j in JOB_NAMES if j != p.job])
            question = f"is {p.first} {an(v)}"
        elif attr == "town":
            v = t.name if ans else rng.choice([x for x in world.towns if x.name != t.name]).name
            question = f"does {p.first} live in {v}"
        elif attr == "colour":
            v = p.colour if ans else rng.choice([c for c in ["red", "blue", "green", "yellow", "white", "black", "grey", "brown"] if c != p.colour])
            question = f"is {p.first}'s favourite colour {v}"
        elif attr == "pet":
            has = [k for k in p.pets if p.pets[k] > 0]
            hasnt = [k for k in p.pets if p.pets[k] == 0]
            if (ans and not has) or (not ans and not hasnt):
                ans = not ans
            k = rng.choice(has if ans else hasnt)
            question = f"does {p.first} have a {k}"
        else:
            lo, hi = (p.age - rng.randint(3, 15), p.age + rng.randint(3, 15))
            v = lo if ans else hi
            question = f"is {p.first} older than {v}"
    elif kind == "species":
        sp = world.pick_species(rng, split)
        passage = (f"The {sp.name} is a {sp.size} {sp.cls} found in the {sp.region}. It is mostly {sp.colour} "
                   f"and eats {sp.diet}. Like other {CLASSES[sp.cls]['plural']}, it is often seen by travellers.")
        attr = rng.choice(["class", "trait", "trait", "diet"])
        if attr == "class":
            v = sp.cls if ans else rng.choice([c for c in CLASS_NAMES if c != sp.cls])
            question = f"is the {sp.name} a kind of {v}"
        elif attr == "trait":
            trait = rng.choice(["covering", "limbs"])
            c = sp.cls if ans else rng.choice([c for c in CLASS_NAMES if c != sp.cls])
            question = f"does the {sp.name} have {CLASSES[c][trait]}"
        else:
            from ..knowledge import DIETS
            v = sp.diet if ans else rng.choice([d for d in DIETS if d != sp.diet])
            question = f"does the {sp.name} eat {v}"
    else:
        t = rng.choice(world.towns)
        passage = (f"{t.name} is a {t.size} in the {t.region}, on the river {t.river}. It was founded in {t.founded} "
                   f"and has about {t.population} people. It is best known for its {t.product}.")
        attr = rng.choice(["region", "product", "river"])
        if attr == "region":
            v = t.region if ans else rng.choice([r for r in REGIONS if r != t.region])
            question = f"is {t.name} in the {v}"
        elif attr == "product":
            from ..knowledge import PRODUCTS
            v = t.product if ans else rng.choice([x for x in PRODUCTS if x != t.product])
            question = f"is {t.name} known for its {v}"
        else:
            v = t.river if ans else rng.choice([x for x in world.towns if x.river != t.river]).river
            question = f"does the river {v} flow through {t.name}"
    return {"question": question, "passage": passage, "label": int(ans)}


# ---------------------------------------------------------------------------
# LAMBADA
# ---------------------------------------------------------------------------
FILLERS = [
    "The road was long and dusty, and the sun was hot.",
    "They passed a farm where a dog barked at them from the gate.",
    "A cart full of hay rolled slowly past.",
    "Clouds gathered over the hills, but it did not rain.",
    "At noon they stopped by a stream to eat some bread and cheese.",
    "An old man waved to them from his garden.",
    "The path turned into the woods, where it was cool and quiet.",
    "They talked about the harvest and the price of salt.",
    "A flock of geese flew over, calling loudly.",
    "Somewhere in the distance a church bell rang.",
    "The wind came up from the river and smelled of rain.",
    "They crossed a narrow stone bridge over a fast stream.",
]


def lambada(world: World, rng: random.Random, split: str) -> dict:
    a, b = two_people(world, rng, split)
    kind = rng.choice(["job", "object1", "object", "name", "town"])
    fill = " ".join(rng.sample(FILLERS, rng.randint(2, 4)))
    if kind == "job":
        job = rng.choice([j for j in JOB_NAMES if len(JOBS[j]["place"].split()) == 2])
        start = (f"{a.first} had worked as {an(job)} in {world.town_of(a).name} for many years, and "
                 f"{a.sub} loved the work.")
        end = rng.choice([f"Every morning before the sun came up, {a.first} went to work at the",
                          f"After the holiday, {a.first} was glad to be back at the",
                          f"On {a.pos} last day before the wedding, {a.first} still went to the"])
        target = JOBS[job]["place"].split()[-1]
    elif kind == "object1":
        obj = rng.choice(OBJECTS)
        start = f"{a.first} left {world.town_of(a).name} early one morning, carrying {an(obj)}."
        end = rng.choice([f"When {a.sub} finally arrived, {a.first} put down {a.pos}",
                          f"As evening came, {a.first} reached for {a.pos}",
                          f"At the gate, {a.first} proudly held up {a.pos}"])
        target = obj
    elif kind == "object":
        oa, ob = rng.sample(OBJECTS, 2)
        who, obj = rng.choice([(a, oa), (b, ob)])
        start = (f"{a.first} and {b.first} set out from {world.town_of(a).name} early one morning. "
                 f"{a.first} carried {an(oa)}, and {b.first} carried {an(ob)}.")
        end = rng.choice([f"When they finally arrived, {who.first} put down {who.pos}",
                          f"As evening came, {who.first} reached for {who.pos}",
                          f"At the gate, {who.first} proudly held up {who.pos}"])
        target = obj
    elif kind == "name":
        t = world.town_of(a)
        start = (f"{a.first} had not seen {a.pos} old friend {b.first} for many years. One day {a.sub} "
                 f"decided to walk to {t.name} to find {b.obj}.")
        end = rng.choice([f"At last, at the door of a small house, {a.first} saw {a.pos} old friend",
                          f"When the sun went down, {a.first} sat by the fire and talked for hours with",
                          f"It had been a long day, but {a.first} was happy to be with {a.pos} friend"])
        target = b.first
    else:
        t1 = world.towns[a.birth_town] if a.birth_town is not None and a.birth_town != a.town \
            else rng.choice(world.towns)
        t2 = world.town_of(a)
        if t1.name == t2.name:
            t1 = rng.choice([t for t in world.towns if t.name != t2.name])
        start = (f"{a.first} was born in {t1.name}, but as a young {('woman' if a.gender == 'f' else 'man')} "
                 f"{a.sub} moved to {t2.name} to work as {an(a.job)}.")
        end = rng.choice([f"Every summer {a.first} went back to visit {a.pos} mother in",
                          f"Even after all those years, {a.first} still missed the streets of",
                          f"When {a.first} grew old, {a.sub} returned to the town where {a.sub} was born,"])
        target = t1.name
    text = f"{start} {fill} {end} {target}"
    return {"text": text}
