"""Web genres in the C4-like register (varied, chatty, repetitive): shop pages, forum threads, travel
notes, local news, recipes, small ads and letters.
"""

from __future__ import annotations

import random

from ..items.wording import an, cap, two_people
from ..knowledge import (
    CLASSES,
    FOODS,
    JOBS,
    OBJECTS,
    SCRIPTS,
    TOOL_NAMES,
    TOOLS,
)
from ..world import World
from .facts import MONTHS, WEEKDAYS, person_sentences, town_sentences


# ---------------------------------------------------------------------------
# Web (C4-like)
# ---------------------------------------------------------------------------
def web_shop(world, rng, split):
    p = world.pick(rng, split)
    t = world.town_of(p)
    d = JOBS[p.job]
    return (f"Welcome to {p.first}'s {d['place'].replace('the ', '')} in {t.name}!\n"
            f"We have been serving the people of {t.name} for {rng.randint(2, 30)} years. {p.name} is a trained {p.job}, "
            f"and every day {p.sub} makes {d['makes']} with care. "
            f"Our customers say we are the best in the {t.region}. Come and visit us on {rng.choice(WEEKDAYS)} "
            f"and see for yourself. Open from {rng.randint(6, 9)} in the morning until {rng.randint(4, 8)} in the evening.\n"
            f"How we work: first {p.first} {SCRIPTS[d['script']][0].format(pos=p.pos)}, then {p.sub} "
            f"{SCRIPTS[d['script']][1].format(pos=p.pos)}. Nothing is rushed. "
            f"Ask for {p.first} at the counter. Prices are fair and children are welcome. "
            f"{t.name} is also famous for its {t.product}, so while you are here, try some!\n"
            f"Find us by the river {t.river}. Call in any time, and tell your friends!")


def web_forum(world, rng, split):
    a, b = two_people(world, rng, split)
    c = world.pick(rng, split)
    tool = rng.choice(TOOL_NAMES)
    goal = TOOLS[tool]["goals"][rng.randrange(2)]
    t = world.town_of(a)
    return (f"Forum > Home and garden > How do I {goal}?\n"
            f"Posted by {a.first.lower()}{rng.randint(1, 99)}: Hi all, I live in {t.name} and I need to {goal}. "
            f"I have never done this before. Any tips? Thanks in advance.\n"
            f"Reply from {b.first.lower()}_{b.job}: Easy. You need {TOOLS[tool]['a']}. That is what it is for. "
            f"I am {an(b.job)} and I do this all the time. Don't try it without {TOOLS[tool]['a']}.\n"
            f"Reply from {c.first.lower()}: Agree with {b.first.lower()}_{b.job}. {cap(TOOLS[tool]['a'])} is used to "
            f"{TOOLS[tool]['use']}. Borrow one from a neighbour if you don't have one. Good luck!\n"
            f"Reply from {a.first.lower()}{rng.randint(1, 99)}: Thank you both, it worked! I used {TOOLS[tool]['a']} "
            f"and it took me ten minutes.")


def web_travel(world, rng, split):
    ts = rng.sample(world.towns, 3)
    out = [f"Travel notes: {rng.randint(3, 14)} days in the {ts[0].region}",
           f"We started our trip in {ts[0].name}. " + " ".join(town_sentences(ts[0], rng)[:3])]
    for t in ts[1:]:
        out.append(f"Next we took the road to {t.name}. " + " ".join(town_sentences(t, rng)[2:])
                   + rng.choice([" The people were friendly.", " The inn was cheap and clean.",
                                 " We did not stay long because it rained."]))
    sp = world.pick_species(rng, split)
    out.append(f"On the way we saw a {sp.name}, a {sp.size} {sp.colour} {sp.cls}. It was {CLASSES[sp.cls]['moves']} "
               f"near the road. Our guide said it eats {sp.diet}.")
    out.append(f"Tip: bring {TOOLS['umbrella']['a']} and {TOOLS['map']['a']}. You will need both.")
    return "\n\n".join(out)


def web_news(world, rng, split):
    a, b = two_people(world, rng, split)
    t = world.town_of(a)
    n = rng.randint(20, 400)
    oa = rng.choice(OBJECTS)
    return (f"{t.name} news, {rng.randint(1, 28)} {rng.choice(MONTHS)}\n"
            f"Local {a.job} wins prize at the {t.region} fair\n"
            f"{a.name}, {a.age}, from {t.name}, won first prize at this year's fair. The judges praised "
            f"{a.pos} {JOBS[a.job]['makes']}. \"I {JOBS[a.job]['acts'][0].split(' ', 1)[0]} "
            f"{JOBS[a.job]['acts'][0].split(' ', 1)[1]} every day for a year,\" {a.first} said. "
            f"Second prize went to {b.name}, {an(b.job)} from {world.town_of(b).name}. "
            f"About {n} people came to watch. The mayor gave {a.first} a silver {oa}. "
            f"{a.first} says {a.sub} will keep the {oa} in {a.pos} window, next to {a.pos} {a.colour} curtains. "
            f"Next year the fair will be held in {rng.choice(world.towns).name}.")


def web_recipe(world, rng, split):
    name = rng.choice(["Making soup", "Baking bread", "Making tea"])
    p = world.pick(rng, split)
    steps = SCRIPTS[name]
    return (f"{name} the old way - a recipe from {p.first} of {world.town_of(p).name}\n"
            f"My {rng.choice(['grandmother', 'grandfather', 'aunt', 'uncle'])} taught me this. It takes about "
            f"{rng.randint(2, 9)} hours but it is worth it. You will need a good kitchen and some patience.\n"
            + "\n".join(f"{i + 1}. {cap(s.format(pos='your'))}." for i, s in enumerate(steps))
            + f"\nThat's it! Serve with {rng.choice(FOODS)}. Leave a comment if you try it.")


def web_ads(world, rng, split):
    out = ["Small ads"]
    for _ in range(rng.randint(4, 6)):
        p = world.pick(rng, split)
        t = world.town_of(p)
        kind = rng.random()
        if kind < 0.35:
            sp = world.pick_species(rng, split)
            out.append(f"For sale: young {sp.name}, {sp.colour}, eats {sp.diet}. Needs a home {CLASSES[sp.cls]['lives']}. "
                       f"Ask {p.first} in {t.name}.")
        elif kind < 0.7:
            tool = rng.choice(TOOL_NAMES)
            out.append(f"Wanted: {TOOLS[tool]['a']} to {TOOLS[tool]['use']}. Will pay well. Contact {p.name}, {t.name}.")
        else:
            out.append(f"{cap(an(p.job))} in {t.name} offers help with {JOBS[p.job]['makes']}. {p.age} years of "
                       f"experience in life, {rng.randint(2, 20)} in the trade. Ask for {p.first}.")
    return "\n".join(out)


def web_letter(world, rng, split):
    a = world.pick(rng, split)
    b = world.people[a.friend] if a.friend is not None else world.pick(rng, split)
    t = world.town_of(a)
    return (f"Dear {b.first},\n"
            f"I hope you are well. Life in {t.name} is quiet. This week I {JOBS[a.job]['acts'][1]}, as I do every "
            f"week, and on {rng.choice(WEEKDAYS)} I went to the market. The weather has been "
            f"{rng.choice(['cold', 'warm', 'wet', 'windy'])}. My {rng.choice(['cat', 'dog', 'bird'])} is getting fat! "
            + " ".join(person_sentences(world, a, rng)[3:5]).replace(a.first, "I").replace(f"{cap(a.pos)} ", "My ")
            + f"\nPlease write soon and tell me about {world.town_of(b).name}. Is it true that it is known for its "
            f"{world.town_of(b).product}?\nWith love,\n{a.first}")


WEB = [web_shop, web_forum, web_travel, web_news, web_recipe, web_ads, web_letter]


def doc_web(world: World, rng: random.Random, split: str) -> str:
    out = [rng.choice(WEB)(world, rng, split)]
    while len(" ".join(out).split()) < 170:
        out.append(rng.choice(WEB)(world, rng, split))
    return "\n\n".join(out)
