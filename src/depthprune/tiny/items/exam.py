"""Exam-style multiple choice: ARC easy and challenge (a rule applied to an unseen species, two-step
questions) and OpenBookQA (class traits); they share the four-lettered-choices record (``_mc``).
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
    NUMBER_WORDS,
    PROPERTY_TEXT,
    REGIONS,
    TOOL_NAMES,
    TOOLS,
    TRAIT_QUESTION,
    UNIQUE_TRAITS,
)
from ..world import Person, World
from .wording import LETTERS, an, two_people


# ---------------------------------------------------------------------------
# ARC (easy / challenge)
# ---------------------------------------------------------------------------
def _mc(question: str, correct: str, wrong: list[str], rng: random.Random, id_: str) -> dict:
    texts = wrong[:3]
    gold = rng.randrange(4)
    texts.insert(gold, correct)
    return {"id": id_, "question": question, "choices": {"text": texts, "label": LETTERS[:]},
            "answerKey": LETTERS[gold]}


def arc_easy(world: World, rng: random.Random, split: str, id_: str = "") -> dict:
    kind = rng.choice(["trait", "trait", "material", "tool", "job"])
    if kind == "trait":
        sp = world.pick_species(rng, split)
        trait = rng.choice(UNIQUE_TRAITS)
        x = f"a {sp.name}"
        q = f"A {sp.name} is a kind of {sp.cls}. " + TRAIT_QUESTION[trait].format(x=x)
        if trait == "young":
            q = f"A {sp.name} is a kind of {sp.cls}. Which of these does {x} do?"
        correct = CLASSES[sp.cls][trait]
        wrong = [CLASSES[c][trait] for c in rng.sample([c for c in CLASS_NAMES if c != sp.cls], 3)]
        return _mc(q, correct, wrong, rng, id_)
    if kind == "material":
        prop = rng.choice(list(PROPERTY_TEXT))
        yes = [m for m in MATERIAL_NAMES if MATERIALS[m][prop]]
        no = [m for m in MATERIAL_NAMES if not MATERIALS[m][prop]]
        if len(no) >= 3 and (rng.random() < 0.6 or len(yes) < 3):
            q = f"Which of these materials {PROPERTY_TEXT[prop][2]}?"
            return _mc(q, rng.choice(yes), rng.sample(no, 3), rng, id_)
        q = f"Which of these materials does not have this property: it {PROPERTY_TEXT[prop][0]}?"
        return _mc(q, rng.choice(no), rng.sample(yes, 3), rng, id_)
    if kind == "tool":
        t = rng.choice(TOOL_NAMES)
        q = f"Which tool is used to {TOOLS[t]['use']}?"
        wrong = [TOOLS[o]["a"] for o in rng.sample([o for o in TOOL_NAMES if o != t], 3)]
        return _mc(q, TOOLS[t]["a"], wrong, rng, id_)
    j = rng.choice(JOB_NAMES)
    q = rng.choice([f"Where does {an(j)} usually work?", f"Where would you find {an(j)} at work?"])
    wrong = [JOBS[o]["place"] for o in rng.sample([o for o in JOB_NAMES if o != j], 3)]
    return _mc(q, JOBS[j]["place"], wrong, rng, id_)


def arc_challenge(world: World, rng: random.Random, split: str, id_: str = "") -> dict:
    kind = rng.choice(["two_species", "count", "oldest", "region", "material_object"])
    if kind == "two_species":
        s1 = world.pick_species(rng, split)
        s2 = world.pick_species(rng, split)
        while s2.cls == s1.cls or s2.name == s1.name:
            s2 = world.pick_species(rng, split)
        trait = rng.choice(["covering", "moves", "limbs"])
        tgt = rng.choice([s1, s2])
        val = CLASSES[tgt.cls][trait]
        stem = {"covering": f"is covered in {val}", "moves": f"moves by {val}", "limbs": f"has {val}"}[trait]
        q = (f"A {s1.name} is a kind of {s1.cls} and a {s2.name} is a kind of {s2.cls}. "
             f"Which animal {stem}?")
        names = [f"the {s1.name}", f"the {s2.name}"]
        correct = f"the {tgt.name}"
        wrong = [n for n in names if n != correct] + ["both of them", "neither of them"]
        return _mc(q, correct, wrong, rng, id_)
    if kind == "count":
        p = world.pick(rng, split)
        k1, k2 = rng.sample(["cats", "dogs", "birds", "goats", "hens"], 2)
        n1, n2 = rng.randint(1, 5), rng.randint(1, 5)
        q = (f"{p.first} has {NUMBER_WORDS[n1]} {k1 if n1 > 1 else k1[:-1]} and {NUMBER_WORDS[n2]} "
             f"{k2 if n2 > 1 else k2[:-1]}. How many animals does {p.first} have in all?")
        tot = n1 + n2
        cands = {n1, n2, tot + 1, abs(n1 - n2), tot - 1, tot + 2} - {tot, 0}
        wrong = [NUMBER_WORDS[c] for c in rng.sample(sorted(cands), 3)]
        return _mc(q, NUMBER_WORDS[tot], wrong, rng, id_)
    if kind == "oldest":
        ppl: list[Person] = []
        while len(ppl) < 4:
            q = world.pick(rng, split)
            if q.first not in {x.first for x in ppl}:
                ppl.append(q)
        ages = rng.sample(range(18, 81), 4)
        young = rng.random() < 0.5
        facts = ", ".join(f"{q.first} is {a}" for q, a in zip(ppl[:3], ages[:3])) + f" and {ppl[3].first} is {ages[3]}"
        q = f"{facts} years old. Who is the {'youngest' if young else 'oldest'}?"
        best = (min if young else max)(range(4), key=lambda i: ages[i])
        wrong = [ppl[i].first for i in range(4) if i != best]
        return _mc(q, ppl[best].first, wrong, rng, id_)
    if kind == "region":
        a, b = two_people(world, rng, split)
        ta, tb = world.town_of(a), world.town_of(b)
        if ta.region == tb.region:
            tb = rng.choice([t for t in world.towns if t.region != ta.region])
        who = rng.choice([(a, ta), (b, tb)])
        q = (f"{a.first} lives in {ta.name} and {b.first} lives in {tb.name}. {ta.name} is in the {ta.region} "
             f"and {tb.name} is in the {tb.region}. In which part of the country does {who[0].first} live?")
        correct = f"the {who[1].region}"
        wrong = [f"the {r}" for r in rng.sample([r for r in REGIONS if r != who[1].region], 3)]
        # make sure the other person's region is one of the distractors
        other = tb if who[1] is ta else ta
        if f"the {other.region}" not in wrong:
            wrong[0] = f"the {other.region}"
        return _mc(q, correct, wrong, rng, id_)
    # material_object: composition of object -> material -> property
    m = rng.choice(MATERIAL_NAMES)
    obj = rng.choice(["spoon", "ball", "bead", "box", "button", "cup"])
    props = MATERIALS[m]
    outcome = "it will float" if props["floats"] else "it will sink"
    q = f"A small {obj} is made of {m}. It is dropped into a bucket of water. What will most likely happen?"
    wrong = ["it will float" if outcome == "it will sink" else "it will sink", "it will burn", "it will turn into glass"]
    return _mc(q, outcome, wrong, rng, id_)


# ---------------------------------------------------------------------------
# OpenBookQA-like (only for the commonsense calibration mix)
# ---------------------------------------------------------------------------
def obqa(world: World, rng: random.Random, split: str, id_: str = "") -> dict:
    sp = world.pick_species(rng, split)
    trait = rng.choice(UNIQUE_TRAITS)
    val = CLASSES[sp.cls][trait]
    q = f"All {CLASSES[sp.cls]['plural']} share some traits. A {sp.name} is one of the {CLASSES[sp.cls]['plural']}, so it most likely"
    stem = {"lives": "lives", "covering": "is covered in", "moves": "gets around by", "limbs": "has",
            "young": ""}[trait]
    def fmt(v: str) -> str:
        return f"{stem} {v}".strip()

    correct = fmt(val)
    wrong = [fmt(CLASSES[c][trait]) for c in rng.sample([c for c in CLASS_NAMES if c != sp.cls], 3)]
    d = _mc(q, correct, wrong, rng, id_)
    return {"id": id_, "question_stem": q, "choices": d["choices"], "answerKey": d["answerKey"]}
