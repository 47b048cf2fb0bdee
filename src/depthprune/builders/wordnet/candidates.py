"""The WordNet multiple-choice tasks' candidate items: which words count, and one builder per task.

A candidate is an item before its distractors (:class:`Cand`): its context, answer, the words no
distractor may be, and its *unit* (cluster). The rules each task follows (which lemmas, senses and
example sentences qualify) are written out in :mod:`depthprune.builders.wordnet.tasks`; this module applies
them to WordNet as :mod:`depthprune.builders.wordnet.reader` reads it. Kept apart from the distractor filter
(:mod:`depthprune.builders.wordnet.distractors`) because what an item asks and how it is made hard are two jobs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from depthprune.builders import model_free as bl
from depthprune.builders.wordnet import reader as wnr

MIN_CORPUS = 5  # corpus occurrences that make a word familiar
MIN_SEMCOR = 1  # or SemCor tags of the word in that part of speech
#: WordNet's lexicographer files of concrete nouns (wninput(5WN)): animal, artifact, body, food, object,
#: person, plant, substance; food and substance nouns are mostly mass nouns, written without an article
CONCRETE = {5: "animal", 6: "artifact", 8: "body", 13: "food", 17: "object", 18: "person", 20: "plant",
            27: "substance"}
MASS = {13, 27}
ONE_WORD = re.compile(r"[a-z]{3,}")
_TRAIL = re.compile(r"[.,;:!?)]+$")


@dataclass
class Cand:
    """A candidate item before its distractors: context, answer and what validity checks need."""

    unit: str  # cluster
    ctx: str
    gold: str
    pos: str
    slot: str  # distractors come from answers of the same slot
    lemma: str  # the answer's lemma
    synsets: tuple[str, ...]  # source synsets (held out of the n-gram corpus)
    banned: frozenset[str]  # words that may not be distractors (true answers, neighbours)
    ctx_words: tuple[str, ...]  # words a distractor may not be related to


# -- words ------------------------------------------------------------------------------------


def corpus_sentences(wn: wnr.WordNet) -> list[tuple[str, str]]:
    """(synset key, text) for every definition and example sentence, in key order."""
    return [(key, text) for key in sorted(wn.synsets)
            for text in (wn.synsets[key].definition, *wn.synsets[key].examples)
            if text]


def corpus_counts(wn: wnr.WordNet) -> Counter:
    return Counter(w for _key, text in corpus_sentences(wn) for w in bl.words(text))


def familiar(word: str, pos: str, wn: wnr.WordNet, counts: Counter) -> bool:
    return bool(ONE_WORD.fullmatch(word)) and (wn.tag_count(word, pos) >= MIN_SEMCOR or counts[word] >= MIN_CORPUS)


def _lower_words(s: wnr.Synset) -> list[str]:
    return [w for w in s.words if ONE_WORD.fullmatch(w)]


def _neighbourhood_words(wn: wnr.WordNet, key: str) -> set[str]:
    keys = {key, *wn.synsets[key].related("@", "@i", "~", "~i", "&", "^", "$", "=")}
    return {w.lower() for k in keys for w in wn.synsets[k].words}


def form_class(form: str, lemma: str, pos: str) -> str:
    if form == lemma:
        return "base"
    if pos == "n":
        return "plural"
    if pos == "v":
        return next((s for s in ("ing", "ed", "s") if form.endswith(s)), "irregular")
    return next((s for s in ("est", "er") if form.endswith(s)), "irregular")


# -- candidates per task -------------------------------------------------------------------------


def _looks_plural(wn: wnr.WordNet, lemma: str) -> bool:
    """A noun lemma that is the plural of another noun lemma (``lodgings``: "A lodgings is" reads wrong)."""
    return any(how != "base" for _lemma, how in wnr.base_forms(wn, lemma, "n"))


def hypernym_candidates(wn: wnr.WordNet, counts: Counter) -> list[Cand]:
    out = []
    for (lemma, pos), keys in sorted(wn.senses.items()):
        if pos != "n" or not familiar(lemma, "n", wn, counts):
            continue
        if any(wn.tag_count(lemma, p) > wn.tag_count(lemma, "n") for p in "var" if (lemma, p) in wn.senses):
            continue  # mostly another part of speech ("dry", "sensitive")
        s = wn.synsets[keys[0]]
        hypernyms = s.related("@")
        if s.lexfile not in CONCRETE or lemma not in s.words or len(hypernyms) != 1:
            continue
        h = wn.synsets[hypernyms[0]]
        # the answer names the hypernym in one of its own two most frequent senses ("court" is not
        # what a reader hears in "A motel is a kind of court")
        ranked = sorted((wn.senses[(w, "n")].index(h.key), -counts[w], w) for w in _lower_words(h)
                        if familiar(w, "n", wn, counts))
        golds = [w for rank, _c, w in ranked if rank <= 1]
        if not golds or bl.related(lemma, golds[0]) or _looks_plural(wn, lemma):
            continue
        true_keys = {k for sense in keys for k in (sense, *wn.ancestors(sense))}
        banned = {w.lower() for k in true_keys for w in wn.synsets[k].words} | {lemma}
        subject = lemma.capitalize() if s.lexfile in MASS else f"{'An' if lemma[0] in 'aeiou' else 'A'} {lemma}"
        ctx = f"{subject} is a kind of"
        if any(bl.related(golds[0], w) for w in bl.words(ctx)):
            continue
        out.append(Cand(h.key, ctx, golds[0], "n", "n", golds[0], (s.key, h.key), frozenset(banned),
                        tuple(bl.words(ctx))))
    return out


def definition_candidates(wn: wnr.WordNet, counts: Counter) -> list[Cand]:
    lemmas = sorted({lemma for (lemma, pos) in wn.senses if pos in "nva"})
    chosen: dict[str, Cand] = {}  # synset -> candidate
    ranked = []
    for lemma in lemmas:
        options = [(wn.tag_count(lemma, pos), -i, pos) for i, pos in enumerate("nva") if (lemma, pos) in wn.senses]
        tags, _, pos = max(options)
        if not familiar(lemma, pos, wn, counts):
            continue
        s = wn.synsets[wn.senses[(lemma, pos)][0]]
        definition = s.definition
        dwords = bl.words(definition)
        if lemma not in s.words or not 3 <= len(definition.split()) <= 20 or '"' in definition:
            continue
        if any(bl.related(lemma, w) for w in dwords):
            continue
        ranked.append((-tags, -counts[lemma], lemma, pos, s))
    for _tags, _count, lemma, pos, s in sorted(ranked):
        if s.key in chosen:  # one item per synset: its most tagged lemma
            continue
        banned = _neighbourhood_words(wn, s.key) | {lemma}
        chosen[s.key] = Cand(lemma, f'The word that means "{s.definition}" is', lemma, pos, pos, lemma, (s.key,),
                             frozenset(banned), tuple(bl.words(s.definition)))
    return sorted(chosen.values(), key=lambda c: c.unit)


def cloze_candidates(wn: wnr.WordNet, counts: Counter) -> list[Cand]:
    out, seen = [], set()
    for key in sorted(wn.synsets):
        s = wn.synsets[key]
        lemmas = {w for w in _lower_words(s)}
        if not lemmas:
            continue
        for example in s.examples:
            if example in seen:
                continue
            seen.add(example)
            tokens = example.split()
            for i, token in enumerate(tokens[:26]):
                form = _TRAIL.sub("", token)
                if not ONE_WORD.fullmatch(form):
                    continue
                found = [(lemma, how) for lemma, how in wnr.base_forms(wn, form, s.pos) if lemma in lemmas]
                if not found:
                    continue
                lemma = found[0][0]
                context = tokens[:i]
                if not 4 <= len(context) <= 25 or not familiar(lemma, s.pos, wn, counts):
                    break
                ctx = " ".join(context)
                cwords = bl.words(ctx)
                if '"' in ctx or any(bl.related(w, form) or bl.related(w, lemma) for w in cwords):
                    break
                banned = _neighbourhood_words(wn, key) | {lemma, form}
                out.append(Cand(lemma, ctx, form, s.pos, f"{s.pos}:{form_class(form, lemma, s.pos)}", lemma, (key,),
                                frozenset(banned), tuple(cwords)))
                break
    return out


CANDIDATE_BUILDERS: dict[str, Callable[[wnr.WordNet, Counter], list[Cand]]] = {
    "hypernym": hypernym_candidates, "definition": definition_candidates, "cloze": cloze_candidates}
