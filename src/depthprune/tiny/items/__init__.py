"""Task items in the formats of the paper's benchmarks, drawn from the world.

Each generator returns one record with exactly the fields of the real dataset
that lm-eval reads (HellaSwag, WinoGrande, ARC, PIQA, BoolQ, LAMBADA), so the
fixture tasks can mirror lm-eval's own YAMLs.  The same generators feed the
training corpus (rendered as text *with* the answer, on train-split entities
and train-only phrasings) and the evaluation fixtures (held-out entities,
held-out phrasings) -- as in real pretraining, the model has seen the task
*styles*, never the test items.

What each task needs from the model (why it is not n-gram memorisation):

* hellaswag: script knowledge -- which step of an everyday procedure comes next
  after the steps already told, for an unseen person.
* winogrande: two thirds knowledge schemas whose options are things (which of
  two objects is too big for the other, which material floats/burns/breaks,
  how each animal class escapes, which tool does a job), one third name
  schemas in which an unseen name must be bound to a job or a comparison
  stated earlier in the sentence.
* arc_easy: one general rule (class traits, material properties, tool uses,
  workplaces) applied to an unseen species or a stated class.
* arc_challenge: two steps -- binding two unseen species to classes and then a
  trait; adding counts; the maximum of stated ages; town -> region hops.
* piqa: tool/material knowledge under goal phrasings never seen in training.
* boolq: verifying a claim against a passage -- about an unseen person or
  species (reading, sometimes through a class rule: the passage says "bird",
  the question asks about feathers), or about towns, materials, tools and
  animal classes (world knowledge the passage does not spell out).
* lambada: the last word (a workplace, an object, a name, a town) is fixed by
  something said sentences earlier; the last sentence alone does not
  determine it.  Variants range from one cue in the passage (a job -> its
  workplace; the one object carried) to binding among two people.
"""

from __future__ import annotations

import random

from .world import (
    CLASS_ESCAPE,
    CLASS_NAMES,
    CLASSES,
    COMPARISONS,
    CONTAINER_SIZE,
    ITEM_SIZE,
    JOB_NAMES,
    JOBS,
    MATERIAL_ADJ,
    MATERIAL_NAMES,
    MATERIALS,
    NUMBER_WORDS,
    OBJECTS,
    PROPERTY_TEXT,
    REGIONS,
    SCRIPTS,
    SOCIAL,
    TOOL_NAMES,
    TOOLS,
    TRAIT_QUESTION,
    UNIQUE_TRAITS,
    Person,
    World,
)

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


# ---------------------------------------------------------------------------
# HellaSwag
# ---------------------------------------------------------------------------
def hellaswag(world: World, rng: random.Random, split: str, ind: int = 0) -> dict:
    p = world.pick(rng, split)
    if rng.random() < 0.75:
        label = JOBS[p.job]["script"]
    else:
        label = rng.choice(["Making tea", "Washing clothes"])
    steps = SCRIPTS[label]
    k = rng.randint(1, len(steps) - 1)  # steps shown
    shown = [step(s, p) for s in steps[:k]]
    first = f"{p.first} {shown[0]}."
    rest = [f"{cap(p.sub)} {s}." if rng.random() < 0.6 else f"{rng.choice(['Then', 'Next', 'After that,'])} {p.sub} {s}."
            for s in shown[1:]]
    ctx_a = " ".join([first] + rest)
    ctx_b = rng.choice([p.sub, f"then {p.sub}", f"next, {p.sub}", f"after that, {p.sub}"])
    correct = step(steps[k], p) + "."
    wrong: list[str] = []
    # adversarial distractors from the same procedure: a step that comes later
    # (skipping ahead) and a step already told (a tempting repeat), then others
    if k + 2 < len(steps):
        wrong.append(step(steps[rng.randint(k + 2, len(steps) - 1)], p) + ".")
    if rng.random() < 0.7:
        wrong.append(step(steps[rng.randrange(k)], p) + ".")
    others = [s for s in SCRIPTS if s != label]
    while len(wrong) < 3:
        o = SCRIPTS[rng.choice(others)]
        cand = step(o[rng.randrange(1, len(o))], p) + "."
        if cand not in wrong and cand != correct:
            wrong.append(cand)
    endings = wrong[:]
    gold = rng.randrange(4)
    endings.insert(gold, correct)
    return {"ind": ind, "activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b,
            "ctx": ctx_a + " " + ctx_b.capitalize(), "endings": endings,
            "source_id": f"tiny~{label}", "split": split, "split_type": "indomain",
            "label": str(gold)}


# ---------------------------------------------------------------------------
# WinoGrande
# ---------------------------------------------------------------------------
WINO_MATERIAL = [  # (property, sentence with {a} {b} and the blank, outcome if property True, if False)
    ("floats", "The children dropped {a} ball and {b} ball into the pond, and the _ ball", "floated on the water",
     "sank to the bottom"),
    ("burns", "{A} threw {a} stick and {b} stick into the fire, and the _ stick", "burned quickly",
     "did not burn at all"),
    ("breaks", "{A} knocked {a} cup and {b} cup off the table, and the _ cup", "broke into pieces",
     "did not break"),
    ("magnetic", "{A} held a magnet over {a} nail and {b} nail, and the _ nail", "jumped up to the magnet",
     "stayed where it was"),
]


def winogrande(world: World, rng: random.Random, split: str) -> dict:
    """Half knowledge schemas (sizes, materials, animal classes, tools: the
    options are things, as in most of WinoGrande), half name schemas (a name
    must be bound to a job or a comparison stated in the same sentence)."""
    kind = rng.choice(["size", "material", "class", "tool", "job", "compare"])
    which = rng.randrange(2)
    if kind == "size":
        item = rng.choice(list(ITEM_SIZE))
        conts = [c for c in CONTAINER_SIZE if CONTAINER_SIZE[c] < ITEM_SIZE[item]]
        cont = rng.choice(conts)
        tail = "was too big" if which == 0 else "was too small"
        sentence = f"The {item} would not fit into the {cont} because the _ {tail}."
        x, y = item, cont
    elif kind == "material":
        prop, frame, yes, no = rng.choice(WINO_MATERIAL)
        m1 = rng.choice([m for m in MATERIAL_NAMES if MATERIALS[m][prop]])
        m2 = rng.choice([m for m in MATERIAL_NAMES if not MATERIALS[m][prop]])
        x, y = MATERIAL_ADJ[m1], MATERIAL_ADJ[m2]
        pa, pb = (x, y) if rng.random() < 0.5 else (y, x)
        p = world.pick(rng, split)
        sentence = frame.format(A=p.first, a=an(pa), b=an(pb)) + " " + (yes if which == 0 else no) + "."
    elif kind == "class":
        c1, c2 = rng.sample(CLASS_NAMES, 2)
        sentence = (f"{cap(an(c1))} and {an(c2)} were resting by the lake. When the cat came, the _ "
                    f"{CLASS_ESCAPE[c1] if which == 0 else CLASS_ESCAPE[c2]}.")
        x, y = c1, c2
    elif kind == "tool":
        t1, t2 = rng.sample(TOOL_NAMES, 2)
        p = world.pick(rng, split)
        tail = "worked" if which == 0 else "was no use at all"
        sentence = f"{p.first} tried to {TOOLS[t1]['use']} with the {t2} and then with the {t1}, and only the _ {tail}." \
            if which == 0 else f"{p.first} tried to {TOOLS[t1]['use']} with the {t1} and then with the {t2}, but the _ {tail}."
        x, y = (t1, t2) if which == 0 else (t2, t1)
        which = 0
    else:
        a, b = two_people(world, rng, split)
        x, y = a.first, b.first
        if kind == "job":
            ja, jb = rng.sample(JOB_NAMES, 2)
            act = rng.choice(JOBS[[ja, jb][which]]["acts"])
            when = rng.choice(["Early in the morning", "One day last week", "On Monday", "Before the fair",
                               "After lunch", "Late in the evening"])
            sentence = f"{x} is {an(ja)} and {y} is {an(jb)}. {when}, _ {act}."
        else:
            fact, tx, ty = rng.choice(COMPARISONS)
            sentence = cap(fact.format(X=x, Y=y) + ", " + (tx if which == 0 else ty) + ".")
    opts = [x, y]
    if rng.random() < 0.5:  # option order independent of mention order
        opts = [y, x]
        which = 1 - which
    return {"sentence": sentence, "option1": opts[0], "option2": opts[1], "answer": str(which + 1)}


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


# ---------------------------------------------------------------------------
# Social IQa-like (only for the commonsense calibration mix)
# ---------------------------------------------------------------------------
def siqa(world: World, rng: random.Random, split: str) -> dict:
    a, b = two_people(world, rng, split)
    sit, q, right, w1, w2 = rng.choice(SOCIAL)
    fmt = dict(A=a.first, B=b.first, apos=a.pos, bpos=b.pos)
    ans = [right.format(**fmt), w1.format(**fmt), w2.format(**fmt)]
    order = [0, 1, 2]
    rng.shuffle(order)
    return {"context": sit.format(**fmt), "question": q.format(**fmt),
            "answerA": ans[order[0]], "answerB": ans[order[1]], "answerC": ans[order[2]],
            "label": str(order.index(0) + 1)}


# ---------------------------------------------------------------------------
# PIQA
# ---------------------------------------------------------------------------
MATERIAL_GOALS = [  # (property, value wanted, goals (3 frames), solution template)
    ("floats", True, ["make a raft that will float on the lake", "build a toy boat that stays on top of the water",
                      "make a float for a fishing line"], "Make it from {m}."),
    ("burns", True, ["start a campfire", "keep a stove burning through the night", "light a fire to cook on"],
     "Gather some dry {m} and set it alight."),
    ("transparent", True, ["make a window that lets in the light", "make a jar you can see into",
                           "cover a picture but still let people see it"], "Use a sheet of {m}."),
    ("soft", True, ["make a soft pillow", "stuff a toy so it is soft to hug", "make a comfortable bed for a puppy"],
     "Fill it with {m}."),
    ("magnetic", True, ["make something a magnet can pick up", "make a needle for a compass",
                        "make a lid that sticks to a magnet"], "Make it from {m}."),
    ("breaks", False, ["make a cup that will not break if a child drops it", "make a plate for a picnic on the rocks",
                       "make a bowl that can fall off the table safely"], "Make it from {m}."),
    ("burns", False, ["build a hearth that will not catch fire", "make a safe floor beside the fireplace",
                      "build a wall around the campfire"], "Build it from {m}."),
]


def piqa(world: World, rng: random.Random, split: str) -> dict:
    frame = 2 if split == "heldout" else rng.randrange(2)
    if rng.random() < 0.6:
        t, o = rng.sample(TOOL_NAMES, 2)
        goal_text = TOOLS[t]["goals"][frame]
        goal = rng.choice([f"How can you {goal_text}?", f"To {goal_text},", f"How do I {goal_text}?"])
        tmpl = rng.choice(["Use {a}.", "Take {a} and use it.", "Get {a} and do it with that."])
        sol_ok, sol_bad = tmpl.format(a=TOOLS[t]["a"]), tmpl.format(a=TOOLS[o]["a"])
    else:
        prop, want, goals, tmpl = rng.choice(MATERIAL_GOALS)
        good = [m for m in MATERIAL_NAMES if MATERIALS[m][prop] == want]
        bad = [m for m in MATERIAL_NAMES if MATERIALS[m][prop] != want]
        goal_text = goals[frame]
        goal = rng.choice([f"How can you {goal_text}?", f"To {goal_text},", f"How do I {goal_text}?"])
        sol_ok, sol_bad = tmpl.format(m=rng.choice(good)), tmpl.format(m=rng.choice(bad))
    label = rng.randrange(2)
    sols = [sol_bad, sol_ok] if label == 1 else [sol_ok, sol_bad]
    return {"goal": goal, "sol1": sols[0], "sol2": sols[1], "label": label}


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
            from .world import DIETS
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
            from .world import PRODUCTS
            v = t.product if ans else rng.choice([x for x in PRODUCTS if x != t.product])
            question = f"is {t.name} known for its {v}"
        else:
            v = t.river if ans else rng.choice([x for x in world.towns if x.river != t.river]).river
            question = f"does the river {v} flow through {t.name}"
    return {"question": question, "passage": passage, "label": int(ans)}


# ---------------------------------------------------------------------------
# LAMBADA
# ---------------------------------------------------------------------------
_FILLERS = [
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
    fill = " ".join(rng.sample(_FILLERS, rng.randint(2, 4)))
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


# ---------------------------------------------------------------------------
# Commonsense-170k (LLM-Adapters) records
# ---------------------------------------------------------------------------
def commonsense_record(kind: str, item: dict) -> dict:
    """Render an item as a Commonsense-170k record (instruction/input/output/answer)."""
    if kind == "boolq":
        ins = (f"Please answer the following question with true or false, question: "
               f"{item['passage']} {item['question']}?\n\nAnswer format: true/false")
        ans = "true" if item["label"] else "false"
    elif kind == "piqa":
        ins = (f"Please choose the correct solution to the question: {item['goal']}\n\n"
               f"Solution1: {item['sol1']}\n\nSolution2: {item['sol2']}\n\nAnswer format: solution1/solution2")
        ans = f"solution{item['label'] + 1}"
    elif kind == "siqa":
        ins = (f"Please choose the correct answer to the question: {item['context']} {item['question']}\n\n"
               f"Answer1: {item['answerA']}\n\nAnswer2: {item['answerB']}\n\nAnswer3: {item['answerC']}\n\n"
               f"Answer format: answer1/answer2/answer3")
        ans = f"answer{item['label']}"
    elif kind == "hellaswag":
        ends = "\n\n".join(f"Ending{i + 1}: {e}" for i, e in enumerate(item["endings"]))
        ins = (f"Please choose the correct ending to complete the given sentence: "
               f"{item['activity_label']}: {item['ctx']}\n\n{ends}\n\nAnswer format: ending1/ending2/ending3/ending4")
        ans = f"ending{int(item['label']) + 1}"
    elif kind == "winogrande":
        ins = (f"Please choose the correct answer to fill in the blank to complete the given sentence: "
               f"{item['sentence']}\n\nOption1: {item['option1']}\n\nOption2: {item['option2']}\n\n"
               f"Answer format: option1/option2")
        ans = f"option{item['answer']}"
    elif kind in ("arc_easy", "arc_challenge", "obqa"):
        q = item.get("question", item.get("question_stem"))
        opts = "\n\n".join(f"Answer{i + 1}: {t}" for i, t in enumerate(item["choices"]["text"]))
        n = len(item["choices"]["text"])
        fmt = "/".join(f"answer{i + 1}" for i in range(n))
        ins = f"Please choose the correct answer to the question: {q}\n\n{opts}\n\nAnswer format: {fmt}"
        ans = f"answer{item['choices']['label'].index(item['answerKey']) + 1}"
    else:
        raise ValueError(kind)
    return {"instruction": ins, "input": "", "output": f"the correct answer is {ans}", "answer": ans}


# Mix of the real Commonsense-170k (approximate shares of its eight sources).
COMMONSENSE_MIX = {"boolq": 0.06, "piqa": 0.10, "siqa": 0.20, "hellaswag": 0.23, "winogrande": 0.24,
                   "arc_easy": 0.05, "arc_challenge": 0.03, "obqa": 0.09}


def any_item(kind: str, world: World, rng: random.Random, split: str) -> dict:
    return {"boolq": lambda: boolq(world, rng, split), "piqa": lambda: piqa(world, rng, split),
            "siqa": lambda: siqa(world, rng, split), "hellaswag": lambda: hellaswag(world, rng, split),
            "winogrande": lambda: winogrande(world, rng, split),
            "arc_easy": lambda: arc_easy(world, rng, split), "arc_challenge": lambda: arc_challenge(world, rng, split),
            "obqa": lambda: obqa(world, rng, split)}[kind]()


def commonsense(world: World, rng: random.Random, split: str) -> dict:
    kinds = list(COMMONSENSE_MIX)
    kind = rng.choices(kinds, weights=[COMMONSENSE_MIX[k] for k in kinds])[0]
    return commonsense_record(kind, any_item(kind, world, rng, split))


def render_answered(kind: str, item: dict) -> str:
    """Render an item with its answer as plain text in the lm-eval prompt style."""
    if kind == "hellaswag":
        return f"{item['activity_label']}: {item['ctx']} {item['endings'][int(item['label'])]}"
    if kind == "winogrande":
        opt = item["option" + item["answer"]]
        return item["sentence"].replace("_", opt)
    if kind in ("arc_easy", "arc_challenge"):
        ans = item["choices"]["text"][item["choices"]["label"].index(item["answerKey"])]
        return f"Question: {item['question']}\nAnswer: {ans}"
    if kind == "obqa":
        ans = item["choices"]["text"][item["choices"]["label"].index(item["answerKey"])]
        return f"{item['question_stem']} {ans}."
    if kind == "piqa":
        return f"Question: {item['goal']}\nAnswer: {item['sol' + str(item['label'] + 1)]}"
    if kind == "boolq":
        return f"{item['passage']}\nQuestion: {item['question']}?\nAnswer: {'yes' if item['label'] else 'no'}"
    if kind == "siqa":
        ans = item["answer" + "ABC"[int(item["label"]) - 1]]
        return f"{item['context']} {item['question']} {cap(ans)}."
    if kind == "lambada":
        return item["text"]
    raise ValueError(kind)

