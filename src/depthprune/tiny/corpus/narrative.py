"""Narrative genres: a day in someone's life (their job's procedure told in order), journeys that
bind objects and names early and refer to them late (the LAMBADA skill), market stories that need
counting, and rosters and tickets that carry codes to copy.
"""

from __future__ import annotations

import random

from ..items.reading import FILLERS, lambada
from ..items.wording import an, cap, num, pets_phrase, two_people
from ..knowledge import (
    FOODS,
    JOBS,
    NUMBER_WORDS,
    OBJECTS,
    SCRIPTS,
)
from ..world import World
from .facts import WEEKDAYS


# ---------------------------------------------------------------------------
# Narrative
# ---------------------------------------------------------------------------
def doc_life(world: World, rng: random.Random, split: str) -> str:
    p = world.pick(rng, split)
    t = world.town_of(p)
    job = JOBS[p.job]
    steps = SCRIPTS[job["script"]]
    out = [f"{p.name} lives in {t.name}, a {t.size} on the river {t.river}. {cap(p.sub)} is {an(p.job)}."]
    out.append(rng.choice([f"Every day {p.first} goes to {job['place']}.", f"{cap(p.pos)} work is at {job['place']}."]))
    conns = ["First", "Then", "Next", "After that", "Later", "Finally"]
    for i, s in enumerate(steps):
        c = conns[min(i, len(conns) - 1)] if i < len(steps) - 1 else "Finally"
        subj = p.first if i % 3 == 0 else p.sub
        out.append(f"{c}, {subj} {s.format(pos=p.pos)}.")
    if p.n_pets:
        out.append(f"At home, {p.first} has {pets_phrase(p)}.")
        for k, names in p.pet_names.items():
            if names:
                out.append(rng.choice([f"The {k} called {names[0]} waits by the door every evening.",
                                       f"{names[0]}, the {k}, is {p.pos} favourite."]))
    if p.friend is not None:
        q = world.people[p.friend]
        out.append(f"In the evening, {p.first} often visits {p.pos} friend {q.first}, who is {an(q.job)} in "
                   f"{world.town_of(q).name}.")
        out.append(rng.choice([f"{q.first} always tells stories about {JOBS[q.job]['place']}.",
                               "They drink tea and talk about the day."]))
    if rng.random() < 0.5:
        gen = rng.choice(["Making tea", "Washing clothes"])
        out.append(f"On {rng.choice(WEEKDAYS)}s {p.first} stays at home.")
        for i, s in enumerate(SCRIPTS[gen]):
            out.append(f"{['First', 'Then', 'Next', 'Then', 'After that', 'At last'][i]} {p.sub} {s.format(pos=p.pos)}.")
    out.append(f"{p.first} is {p.age} years old and loves the colour {p.colour}.")
    return " ".join(out)


def doc_journey(world: World, rng: random.Random, split: str) -> str:
    parts = [lambada(world, rng, split)["text"] + "."]
    a, b = two_people(world, rng, split)
    oa, ob = rng.sample(OBJECTS, 2)
    parts.append(f"Another time, {a.first} and {b.first} went to the fair in {world.town_of(b).name}. "
                 f"{a.first} brought {an(oa)} and {b.first} brought {an(ob)}. "
                 f"{' '.join(rng.sample(FILLERS, 2))} "
                 f"At the fair, {b.first} lost {b.pos} {ob}, and {a.first} helped {b.obj} look for the {ob}. "
                 f"In the end they found the {ob} under a table, and {b.first} thanked {a.first}.")
    if rng.random() < 0.5:
        parts.append(lambada(world, rng, split)["text"] + ".")
    return "\n\n".join(parts)


def doc_market(world: World, rng: random.Random, split: str) -> str:
    p = world.pick(rng, split)
    f1, f2 = rng.sample(FOODS, 2)
    n1, n2, n3 = rng.randint(2, 6), rng.randint(1, 5), rng.randint(1, 3)
    n3 = min(n3, n1 + n2 - 1)
    total = n1 + n2
    left = total - n3
    t = world.town_of(p)
    out = [f"On {rng.choice(WEEKDAYS)} {p.first} went to the market in {t.name}.",
           f"{cap(p.sub)} bought {num(n1, rng)} {f1} from the first stall.",
           f"Then {p.sub} saw some fine {f1} at another stall and bought {num(n2, rng)} more.",
           f"Now {p.first} had {num(total, rng)} {f1}.",
           f"On the way home {p.sub} gave {num(n3, rng)} of them to a hungry child.",
           f"So {p.first} came home with {num(left, rng)} {f1}."]
    if rng.random() < 0.5:
        m = rng.randint(1, 4)
        out.append(f"{cap(p.sub)} also bought {num(m, rng)} {f2}, so {p.sub} carried {num(left + m, rng)} things in all.")
    q = rng.choice([f"How many {f1} did {p.first} bring home? {cap(NUMBER_WORDS[left])}.",
                    f"How many {f1} did {p.first} buy in all? {cap(NUMBER_WORDS[total])}."])
    out.append(q)
    return " ".join(out)


def doc_roster(world: World, rng: random.Random, split: str) -> str:
    """Lists that are read out and then referred to again (registers, roll calls,
    guest lists, race results): text in which the same one-off names recur, so
    copying from context pays off -- the skill LAMBADA-style tasks need."""
    ppl = [world.pick(rng, split) for _ in range(rng.randint(4, 8))]
    names = [p.first for p in ppl]
    t = rng.choice(world.towns)
    kind = rng.randrange(6)
    if kind >= 4:
        return doc_codes(world, rng, split)
    if kind == 0:
        out = [f"Roll call at the school in {t.name}. The teacher read out the names: {', '.join(names)}."]
        absent = rng.choice(names)
        out.append(f"Everyone answered except {absent}. So the teacher read the list again: {', '.join(names)}.")
        out.append(f"Again there was no answer from {absent}. Later that day {absent} came in, out of breath.")
    elif kind == 1:
        order = names[:]
        rng.shuffle(order)
        out = [f"Results of the {t.name} {rng.choice(['boat race', 'foot race', 'horse race'])}. "
               f"The runners were {', '.join(names)}."]
        out.append(" ".join(f"{['First', 'Second', 'Third', 'Fourth', 'Fifth', 'Sixth', 'Seventh', 'Eighth'][i]} "
                            f"place went to {n}." for i, n in enumerate(order)))
        out.append(f"The winner, {order[0]}, thanked {order[1]} and {order[-1]}.")
    elif kind == 2:
        out = [f"Guest list for the wedding in {t.name}:"]
        out += [f"- {p.name}, {an(p.job)} from {world.town_of(p).name}" for p in ppl]
        out.append("Seating: " + "; ".join(f"{a.first} sits next to {b.first}" for a, b in zip(ppl, ppl[1:])) + ".")
    else:
        out = [f"Register of new workers, {t.name}."]
        out += [f"{i + 1}. {p.name} -- {p.job}, age {p.age}" for i, p in enumerate(ppl)]
        q = rng.choice(ppl)
        out.append(f"Note: {q.name} ({q.job}) starts on {rng.choice(WEEKDAYS)}. {q.first} will work at "
                   f"{JOBS[q.job]['place']}.")
    return "\n".join(out)


_CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _code(rng: random.Random) -> str:
    parts = [rng.randint(2, 4) for _ in range(rng.randint(2, 3))]
    return "-".join("".join(rng.choice(_CODE_CHARS) for _ in range(n)) for n in parts)


def doc_codes(world: World, rng: random.Random, split: str) -> str:
    """Order confirmations, tickets and notices in which a random code or a
    one-off name is repeated -- web boilerplate of the kind that makes copying
    from context worthwhile."""
    p = world.pick(rng, split)
    c1, c2 = _code(rng), _code(rng)
    item = rng.choice(OBJECTS)
    t = world.town_of(p)
    if rng.random() < 0.5:
        return (f"Order confirmation\nDear {p.name},\nThank you for your order of {an(item)} from the {t.name} "
                f"market. Your order number is {c1}. Your parcel code is {c2}.\n"
                f"To follow your parcel, enter the parcel code {c2} on our page. If you have a question about "
                f"order {c1}, write to us and give the order number {c1}.\n"
                f"Summary: order {c1}, parcel {c2}, item: {item}, name: {p.name}, town: {t.name}.\n"
                f"Thank you, {p.first}, for shopping with us!")
    return (f"Ticket for the {t.name} summer fair\nName: {p.name}\nTicket code: {c1}\nSeat: {c2}\n"
            f"Please show ticket {c1} at the gate. {p.first} {p.last} may sit in seat {c2} only. "
            f"Lost tickets: tell the clerk your name, {p.name}, and the code {c1}. "
            f"Keep this ticket: code {c1}, seat {c2}.")
