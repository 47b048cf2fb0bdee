"""Everyday-knowledge items: HellaSwag (what step comes next), WinoGrande (which of two fills the
blank), PIQA (which solution reaches the goal) and Social IQa (how people react). One module because all four
ask for knowledge of procedures, things and people that the passage does not state.
"""

from __future__ import annotations

import random

from ..knowledge import (
    CLASS_ESCAPE,
    CLASS_NAMES,
    COMPARISONS,
    CONTAINER_SIZE,
    ITEM_SIZE,
    JOB_NAMES,
    JOBS,
    MATERIAL_ADJ,
    MATERIAL_NAMES,
    MATERIALS,
    SCRIPTS,
    SOCIAL,
    TOOL_NAMES,
    TOOLS,
)
from ..world import World
from .wording import an, cap, step, two_people


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
