"""Encyclopedic genres: articles on people, towns, species, animal classes, materials, tools and
trades, as plain text or in the raw WikiText-2 style (`` = Title = `` headings, spaced punctuation) that the
WikiText fixture uses.
"""

from __future__ import annotations

import random
import re

from ..items.wording import an, cap
from ..knowledge import (
    CLASS_NAMES,
    CLASSES,
    CONTAINER_SIZE,
    ITEM_SIZE,
    JOBS,
    MATERIAL_NAMES,
    MATERIALS,
    PROPERTY_TEXT,
    SCRIPTS,
    TOOL_NAMES,
    TOOLS,
)
from ..world import World
from .facts import person_sentences, species_sentences, town_sentences


# ---------------------------------------------------------------------------
# WikiText-2 raw style
# ---------------------------------------------------------------------------
def wiki_tokenize(s: str) -> str:
    """Mimic the raw WikiText-2 spacing: ' , ' ' . ' " 's " and ' @-@ '."""
    s = re.sub(r"(\w)-(\w)", r"\1 @-@ \2", s)
    s = re.sub(r"(\w)'s\b", r"\1 's", s)
    s = re.sub(r"([,.;:!?()])", r" \1 ", s)
    s = re.sub(r" +", " ", s)
    return s.strip()


def wiki_lines(title: str, sections: list[tuple[str | None, list[str]]]) -> list[str]:
    """Records of a WikiText-2-raw article: heading lines, paragraphs, empty lines."""
    lines = ["", f" = {title} = \n", ""]
    for head, paras in sections:
        if head:
            lines += [f" = = {head} = = \n", ""]
        for para in paras:
            lines += [" " + wiki_tokenize(para) + " \n"]
        lines.append("")
    return lines


def plain_article(title: str, sections: list[tuple[str | None, list[str]]]) -> str:
    out = [title]
    for head, paras in sections:
        if head:
            out.append(head)
        out += paras
    return "\n\n".join(out)


# ---------------------------------------------------------------------------
# Encyclopedic
# ---------------------------------------------------------------------------
def article_person(world, rng, split):
    p = rng.choice(world.pool(split))
    s = person_sentences(world, p, rng)
    job = JOBS[p.job]
    work = [f"{p.first} works at {job['place']} with {job['tool']}, and {p.sub} makes {job['makes']}.",
            f"A normal working day begins when {p.sub} {SCRIPTS[job['script']][0].format(pos=p.pos)}.",
            f"{cap(p.sub)} {job['acts'][0].split(' ', 1)[0]} {job['acts'][0].split(' ', 1)[1]} many times."]
    return p.name, [(None, [" ".join(s[:3])]), ("Family and home", [" ".join(s[3:])]), ("Work", [" ".join(work)])]


def article_town(world, rng, split):
    t = rng.choice(world.towns)
    s = town_sentences(t, rng)
    people = [p for p in world.pool(split) if p.town == world.towns.index(t)]
    rng.shuffle(people)
    notable = [f"{p.name}, {an(p.job)}, lives in {t.name}." for p in people[:4]]
    secs = [(None, [" ".join(s[:3])]), ("History", [s[3] + f" The first houses were built beside the river {t.river}."]),
            ("Economy", [s[4] + f" Traders come from across the {t.region} to buy it."])]
    if notable:
        secs.append(("People", [" ".join(notable)]))
    return t.name, secs


def article_species(world, rng, split):
    sp = rng.choice(world.species_pool(split))
    s = species_sentences(sp, rng)
    return f"{cap(sp.name)}", [(None, [" ".join(s[:3])]), ("Description", [" ".join(s[3:])])]


def article_class(world, rng, split):
    c = rng.choice(CLASS_NAMES)
    t = CLASSES[c]
    members = [s.name for s in world.species_pool(split) if s.cls == c]
    rng.shuffle(members)
    txt = [f"{cap(t['plural'])} are a class of animals. All {t['plural']} have {t['limbs']} and breathe with {t['breathes']}. "
           f"Their bodies are covered in {t['covering']}. Most {t['plural']} live {t['lives']} and move by {t['moves']}. "
           f"A {c} {t['young']}."]
    if members:
        txt.append(f"Well-known {t['plural']} include the " + ", the ".join(members[:5]) + ".")
    return cap(t["plural"]), [(None, txt)]


def article_material(world, rng, split):
    m = rng.choice(MATERIAL_NAMES)
    props = MATERIALS[m]
    sents = [f"{cap(m)} {PROPERTY_TEXT[k][0] if v else PROPERTY_TEXT[k][1]}." for k, v in props.items()]
    rng.shuffle(sents)
    return cap(m), [(None, [f"{cap(m)} is a common material. " + " ".join(sents[:4])]), ("Properties", [" ".join(sents[4:])])]


def article_tool(world, rng, split):
    t = rng.choice(TOOL_NAMES)
    d = TOOLS[t]
    goals = d["goals"][:2]
    return cap(t), [(None, [f"{cap(d['a'])} is used to {d['use']}. People use {d['a']} to {goals[0]}, "
                           f"and also to {goals[1]}."])]


def article_trade(world, rng, split):
    j = rng.choice(list(JOBS))
    d = JOBS[j]
    steps = SCRIPTS[d["script"]]
    return cap(j), [(None, [f"{cap(an(j))} works at {d['place']} and makes {d['makes']}. The main tool of {an(j)} is {d['tool']}."]),
                    (d["script"], [f"When {d['script'].lower()}, {an(j)} first {steps[0].format(pos='their')}, then "
                                   + ", then ".join(s.format(pos='their') for s in steps[1:-1])
                                   + f", and finally {steps[-1].format(pos='their')}."])]


def article_sizes(world, rng, split):
    items = list(ITEM_SIZE)
    rng.shuffle(items)
    conts = list(CONTAINER_SIZE)
    rng.shuffle(conts)
    sents = []
    for it in items[:5]:
        co = rng.choice(conts)
        fits = ITEM_SIZE[it] < CONTAINER_SIZE[co]
        sents.append(f"{cap(an(it))} {'fits easily into' if fits else 'is too big to fit into'} {an(co)}.")
    order = sorted(items[:4], key=lambda i: -ITEM_SIZE[i])
    sents.append(f"From biggest to smallest: {', '.join(order)}.")
    return "Sizes of everyday things", [(None, [" ".join(sents)])]


ARTICLES = [article_sizes, article_person, article_person, article_town, article_species, article_species,
            article_class, article_material, article_tool, article_trade]


def doc_article(world: World, rng: random.Random, split: str, wiki_frac: float = 0.35) -> str:
    n = rng.randint(1, 3)
    chunks = []
    for _ in range(n):
        title, secs = rng.choice(ARTICLES)(world, rng, split)
        chunks.append((title, secs))
    if rng.random() < wiki_frac:
        lines: list[str] = []
        for title, secs in chunks:
            lines += wiki_lines(title, secs)
        return "\n\n".join(lines).strip("\n")
    return "\n\n".join(plain_article(t, s) for t, s in chunks)


def article_town_long(world: World, rng: random.Random, split: str):
    """A longer, coherent town article (WikiText-style): history, geography,
    economy, wildlife of the region, notable residents (third-level headings)."""
    ti = rng.randrange(len(world.towns))
    t = world.towns[ti]
    s = town_sentences(t, rng)
    secs: list[tuple[str | None, list[str]]] = [(None, [" ".join(s[:3]) + " " + s[4]])]
    secs.append(("History", [s[3] + f" The first houses were built beside the river {t.river}, and the "
                 f"{t.size} grew as traders arrived from the rest of the {t.region}."]))
    secs.append(("Economy", [f"The {t.size} is known for its {t.product}. " + " ".join(
        f"Many people work as {j}s, at {JOBS[j]['place']}." for j in rng.sample(list(JOBS), 2))]))
    wild = [sp for sp in world.species_pool(split) if sp.region == t.region]
    rng.shuffle(wild)
    if wild:
        secs.append(("Wildlife", [" ".join(" ".join(species_sentences(sp, rng)[:4]) for sp in wild[:2])]))
    people = [p for p in world.pool(split) if p.town == ti]
    rng.shuffle(people)
    if people:
        secs.append(("Notable people", [f"{len(people[:3])} residents of {t.name} are described below."]))
        for p in people[:3]:
            secs.append((f"= {p.name} =", [" ".join(person_sentences(world, p, rng)[:6])]))
    return t.name, secs


ARTICLES.append(article_town_long)


def wikitext_lines(world: World, rng: random.Random, split: str, n_articles: int) -> list[str]:
    """WikiText-2-raw-style records (one per line) for ``n_articles`` articles."""
    lines: list[str] = []
    for _ in range(n_articles):
        if rng.random() < 0.6:
            title, secs = article_town_long(world, rng, split)
        else:
            title, secs = rng.choice(ARTICLES)(world, rng, split)
        lines += wiki_lines(title, secs)
    return lines
