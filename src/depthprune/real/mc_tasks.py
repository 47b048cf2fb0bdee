"""Multiple-choice tasks for the ``real`` profile from WordNet 3.0, built so the text alone does not answer them.

    depthprune build wordnet-tasks            # reads Debian's wordnet-base, writes the frozen tasks
    depthprune build wordnet-tasks --out DIR  # the same into DIR (compare with the shipped files)
    depthprune build wordnet-tasks --seed-split 0 --seed-test 1 --seed-train 2 --seed-bootstrap 0   # the seeds (these defaults)

``real_nextsent`` leaks its answer: its distractors come from other documents, and a reader
of surface features picks the true ending far above chance. These three tasks ask for what a
language model knows about words, and each is built so that the model-free readers of
:mod:`depthprune.real.baselines` stay at chance (1/4).

Source. WordNet 3.0 as Debian's ``wordnet-base`` ships it (``/usr/share/wordnet``: synsets,
glosses with their example sentences, hypernym pointers, sense order, SemCor tag counts in
``cntlist.rev``, the exception lists; read by :mod:`depthprune.real.wordnet`), under the
WordNet 3.0 licence (``LICENSE-WordNet.txt`` beside the data, from the package's copyright
file). The build refuses, naming the apt package, where the files are missing. Its output is
frozen in ``assets/real/tasks/mc/``; nothing at run time reads WordNet. ``manifest.json``
records the package's version, the sha256 of every source file read and of every shipped file.

Words. An answer or option is one lowercase alphabetic word of 3+ letters that a reader of
English plausibly knows: SemCor tagged one of its senses at least once, or it occurs at least
5 times in WordNet's own glosses and examples (the *corpus*). Two words are *related* where
their spelling shares a root (:func:`depthprune.real.baselines.related`: equal Porter stems,
one inside the other, or a common 5-letter prefix).

Tasks (4 options; each item's ``cluster`` is its source unit; train and test items come from
disjoint units, taken in a seeded shuffle of the units until each split is full):

* ``real_hypernym`` -- taxonomy. ``A flask is a kind of`` -> `` bottle``. The query is a
  noun lemma whose SemCor-commonest part of speech is noun, that is no plural of another
  lemma, and whose first (most frequent) sense lies in a lexicographer file of concrete nouns
  (:data:`CONCRETE`; food and substance nouns, mostly mass nouns, go without an article:
  ``Mayonnaise is a kind of``) and has exactly one hypernym. The answer is the hypernym's
  one-word lemma for which the hypernym is one of its own two first senses ("A motel is a
  kind of court" is not what a reader hears), the most frequent in the corpus among them,
  related to no word of the context. ``cluster``: the hypernym synset (all hyponyms of one
  category are one unit; at most 3 items each). A distractor names no sense of any ancestor
  of any sense of the query (so no other true "kind of"), nor the query itself.
* ``real_definition`` -- meaning. ``The word that means "a large and stately mansion" is`` ->
  `` palace``. The first sense of a noun, verb or adjective lemma (its part of speech the one
  SemCor tags most), its definition of 3..20 words, no word of it related to the lemma;
  one item per lemma and per synset. ``cluster``: the lemma. A distractor has the answer's
  part of speech, is no lemma of the synset or of a synset it points to (hypernym, hyponym,
  similar, also-see, verb group, attribute), and is related to no word of the definition.
* ``real_cloze`` -- a word in use. ``the doctor recommended regular`` -> `` exercise``: a
  WordNet example sentence up to the first occurrence of a one-word lemma of its own synset
  (inflected as morphy(7WN) finds it), with 4..25 words before it, none related to it; one
  item per example text. ``cluster``: the lemma (at most 2 items each). A distractor has the
  answer's part of speech and inflection (singular/plural, -s/-ed/-ing/irregular,
  -er/-est), is no lemma of the synset or its neighbours, and is related to no context word.
  Inflection slots with fewer than :data:`MIN_SLOT` candidates are left out (verbs in -s and
  irregular forms, comparatives), so that every split has distractors for each.

Distractors. Every distractor is the answer of another item of the same split (same part of
speech, for the cloze the same inflection), drawn in proportion to how often it is an answer,
so that answers and distractors come from one distribution: a reader of the option alone
(its length, its frequency, its words) has nothing to tell them apart, and a word's share of
gold appearances is 1/4 wherever it appears. The frequency baselines matter here: true
hypernyms are common words, and matching frequency by drawing from the answers' own
distribution is what keeps "always the most frequent option" at chance. On top of that, an
adversarial filter (as HellaSwag's) chooses among candidate triples: items are taken in a
seeded order, ``CANDIDATES`` valid distractors are drawn per item and ``TRIPLES`` random
triples of them tried, and the triple kept is the one that keeps every filter baseline's running
count of gold wins closest to chance (an item counts 1/t where the gold is among t tied
best). The filter baselines are the cheap readers of :mod:`depthprune.real.baselines` and
*other instances* of the learned ones -- the n-gram model trained on each of ``FOLDS`` folds
of its corpus left out in turn, the option-only classifier trained on held-out folds of the
train split (for train items) or on resampled parts of it (for test items), TF-IDF fitted on the
answers only -- so the numbers reported (fresh instances: :func:`depthprune.real.baselines.report`) are not
those the filter tuned. No language model takes part in choosing distractors. The gold
position is balanced: a seeded permutation of equal counts per position. ``baselines.json``
also reports, under ``unfiltered``, the baselines on the same test items with a random valid
triple from the same pools instead of the filter's (not shipped as a task): what drawing from
the answers' distribution does alone, and what the filter adds (the character TF-IDF reader
is the one the pools alone do not stop).

Corpus of the n-gram baseline: WordNet's definitions and examples, one sentence each, without
those of the synsets the split's items come from (their query, answer or example synsets) and
without any sentence equal to one of theirs: the reader may know the language of WordNet,
not the items themselves.

Metric (fixed with the construction, before any model ran on the tasks): ``acc`` is the
headline of all three. Every option is one word, and options are drawn from the answers' own
distribution of lengths and frequencies, so no length correction is needed; acc scores the
model's probability of the word itself, while acc_norm's division by byte length rewards long
multi-token words whose later tokens follow from the first. acc_norm is recorded beside it.

Margin calibration. The train splits are also written in Commonsense-170k's record format
(``commonsense/mc_train.json``, HellaSwag-style endings as ``real.build`` writes them), each
record with its ``task`` and ``cluster``; ``answer="cloze"`` scores each option as the
continuation of the context, as lm-eval does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.model_registry import REAL_ASSETS
from depthprune.real import baselines as bl
from depthprune.real import wordnet as wnr
from depthprune.task_files import loader_module, multiple_choice_task

OUT = REAL_ASSETS / "tasks" / "mc"
TASKS = ("hypernym", "definition", "cloze")
K = 4
SIZES = {"test": 1200, "train": 500}
SEEDS = {"split": 0, "test": 1, "train": 2, "bootstrap": 0}
CANDIDATES = 24
TRIPLES = 64
FOLDS = 3
CAP = {"hypernym": 3, "definition": 1, "cloze": 2}
MIN_CORPUS, MIN_SEMCOR = 5, 1
MIN_SLOT = 100  # a slot (part of speech, inflection) with fewer candidates is left out
#: WordNet's lexicographer files of concrete nouns (wninput(5WN)): animal, artifact, body, food, object,
#: person, plant, substance; food and substance nouns are mostly mass nouns, written without an article
CONCRETE = {5: "animal", 6: "artifact", 8: "body", 13: "food", 17: "object", 18: "person", 20: "plant",
            27: "substance"}
MASS = {13, 27}
COPYRIGHT = Path("/usr/share/doc") / wnr.APT_PACKAGE / "copyright"
_ONE_WORD = re.compile(r"[a-z]{3,}")
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
    return bool(_ONE_WORD.fullmatch(word)) and (wn.tag_count(word, pos) >= MIN_SEMCOR or counts[word] >= MIN_CORPUS)


def _lower_words(s: wnr.Synset) -> list[str]:
    return [w for w in s.words if _ONE_WORD.fullmatch(w)]


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
                if not _ONE_WORD.fullmatch(form):
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


# -- splits -----------------------------------------------------------------------------------------


def split_units(cands: list[Cand], task: str, seed: int) -> dict[str, list[Cand]]:
    """Units shuffled (seeded); each unit's items (at most CAP, a seeded choice) go to test until it
    holds SIZES['test'], then to train; the rest is unused. No unit is in two splits."""
    slots = Counter(c.slot for c in cands)
    by_unit: dict[str, list[Cand]] = {}
    for c in (c for c in cands if slots[c.slot] >= MIN_SLOT):
        by_unit.setdefault(c.unit, []).append(c)
    rng = random.Random(f"{task}:{seed}")
    units = sorted(by_unit)
    rng.shuffle(units)
    out: dict[str, list[Cand]] = {"test": [], "train": []}
    for unit in units:
        split = next((s for s in ("test", "train") if len(out[s]) < SIZES[s]), None)
        if split is None:
            break
        members = by_unit[unit]
        if len(members) > CAP[task]:
            members = sorted(rng.sample(members, CAP[task]), key=lambda c: (c.ctx, c.gold))
        out[split].extend(members[: SIZES[split] - len(out[split])])
    for split, items in out.items():
        if len(items) < SIZES[split]:
            raise SystemExit(f"{task}: only {len(items)} {split} items (need {SIZES[split]})")
    return out


# -- distractors -------------------------------------------------------------------------------------


def _valid(c: Cand, d: str) -> bool:
    return (d != c.gold and d not in c.banned and not bl.related(d, c.gold) and not bl.related(d, c.lemma)
            and not any(bl.related(d, w) for w in c.ctx_words))


def candidate_distractors(cands: list[Cand], rng: random.Random) -> list[list[str]]:
    """Per item, up to CANDIDATES valid distinct distractors drawn from the answers of the other items
    of its slot, each answer as often as it is an answer (a shuffled list of the slot's answers)."""
    by_slot: dict[str, list[int]] = {}
    for i, c in enumerate(cands):
        by_slot.setdefault(c.slot, []).append(i)
    out = []
    for i, c in enumerate(cands):
        pool = [j for j in by_slot[c.slot] if j != i]
        rng.shuffle(pool)
        picked: list[str] = []
        for j in pool:
            d = cands[j].gold
            if d not in picked and _valid(c, d):
                picked.append(d)
                if len(picked) == CANDIDATES:
                    break
        if len(picked) < K - 1:
            raise SystemExit(f"slot {c.slot}: only {len(picked)} valid distractors for {c.ctx!r} -> {c.gold!r}")
        out.append(picked)
    return out


def _as_item(c: Cand, options: Sequence[str], label: int) -> dict[str, Any]:
    return {"ctx": c.ctx, "options": list(options), "label": label, "pos": c.pos, "cluster": c.unit}


def choose(cands: list[Cand], pools: list[list[str]], readers: dict[str, Callable], rng: random.Random,
           ) -> list[list[str]]:
    """The adversarial filter: per item (seeded order) the triple of its pool that keeps each reader's
    running count of gold wins closest to chance (module docstring). Readers score options alone."""
    import numpy as np

    # every reader scores the gold and each pooled distractor once (option scores are independent)
    probe = [_as_item(c, [c.gold, *pool], 0) for c, pool in zip(cands, pools)]
    tables = {name: reader(probe) for name, reader in readers.items()}
    names = sorted(tables)
    order = list(range(len(cands)))
    rng.shuffle(order)
    sums = np.zeros(len(names))
    out: list[list[str] | None] = [None] * len(cands)
    for t, i in enumerate(order):
        m = len(pools[i])
        triples = {tuple(sorted(rng.sample(range(m), K - 1))) for _ in range(TRIPLES)}
        best, best_cost = None, None
        for triple in sorted(triples):
            wins = np.array([bl.expected_correct([tables[n][i][0], *(tables[n][i][1 + j] for j in triple)], 0)
                             for n in names])
            cost = float(((sums + wins - (t + 1) / K) ** 2).sum())
            if best_cost is None or cost < best_cost - 1e-12:
                best, best_cost, best_wins = triple, cost, wins
        assert best is not None and best_wins is not None  # triples is never empty
        sums += best_wins
        out[i] = [pools[i][j] for j in best]
    return out  # type: ignore[return-value]


def assemble(cands: list[Cand], distractors: list[list[str]], rng: random.Random) -> list[dict[str, Any]]:
    """Items with a balanced gold position (a seeded permutation of equal counts) and shuffled distractors."""
    labels = [i % K for i in range(len(cands))]
    rng.shuffle(labels)
    items = []
    for n, (c, ds, label) in enumerate(zip(cands, distractors, labels)):
        ds = list(ds)
        rng.shuffle(ds)
        options = ds[:label] + [c.gold] + ds[label:]
        items.append(_as_item(c, options, label) | {"id": n})
    return items


# -- n-gram corpora, filter readers --------------------------------------------------------------


def ngram_corpus(sentences: list[tuple[str, str]], held_out: set[str]) -> list[tuple[str, list[str]]]:
    """(synset, tokens) of every sentence not of a held-out synset and not equal to one of theirs."""
    texts = {text for key, text in sentences if key in held_out}
    return [(key, bl.words(text)) for key, text in sentences if key not in held_out and text not in texts]


def fold_lms(corpus: list[tuple[str, list[str]]], seed: str) -> list[bl.NgramLM]:
    """FOLDS n-gram models, each trained without one fold of the corpus's synsets."""
    keys = sorted({k for k, _ in corpus})
    random.Random(seed).shuffle(keys)
    fold = {k: i % FOLDS for i, k in enumerate(keys)}
    return [bl.NgramLM(toks for k, toks in corpus if fold[k] != f) for f in range(FOLDS)]


def filter_readers(lms: list[bl.NgramLM], counts: dict[str, dict[str, int]], tfidf_fit: list[dict[str, Any]],
                   option_only: Sequence[Callable] | None) -> dict[str, Callable]:
    readers: dict[str, Callable] = {
        "longest": lambda items: bl.length(items, 1.0), "shortest": lambda items: bl.length(items, -1.0),
        "frequent_corpus": lambda items: bl.frequency(items, counts, "corpus", 1.0),
        "rare_corpus": lambda items: bl.frequency(items, counts, "corpus", -1.0),
        "frequent_semcor": lambda items: bl.frequency(items, counts, "semcor", 1.0),
        "rare_semcor": lambda items: bl.frequency(items, counts, "semcor", -1.0),
        "overlap": bl.overlap, "tfidf_word": bl.TfidfCosine(tfidf_fit, "word"),
        "tfidf_char": bl.TfidfCosine(tfidf_fit, "char")}
    for f, lm in enumerate(lms):
        readers[f"ngram_{f}"] = lambda items, lm=lm: lm(items)
        readers[f"ngram_norm_{f}"] = lambda items, lm=lm: lm(items, norm=True)
    for f, reader in enumerate(option_only or []):
        readers[f"option_only_{f}"] = reader
    return readers


def option_counts(cands: list[Cand], pools: list[list[str]], wn: wnr.WordNet, counts: Counter,
                  ) -> dict[str, dict[str, int]]:
    """corpus and SemCor counts of every word that may be an option, keyed ``pos:word``."""
    lemma_of = {(c.pos, c.gold): c.lemma for c in cands}
    words = {(c.pos, w) for c, pool in zip(cands, pools) for w in (c.gold, *pool)}
    return {"corpus": {f"{p}:{w}": counts[w] for p, w in sorted(words)},
            "semcor": {f"{p}:{w}": wn.tag_count(lemma_of[(p, w)], p) for p, w in sorted(words)}}


def build_task(task: str, wn: wnr.WordNet, counts: Counter, sentences: list[tuple[str, str]],
               seeds: dict[str, int] = SEEDS, log: Callable[[str], None] = print) -> dict[str, Any]:
    cands = CANDIDATE_BUILDERS[task](wn, counts)
    splits = split_units(cands, task, seeds["split"])
    log(f"{task}: {len(cands)} candidates, {len({c.unit for c in cands})} units")
    result: dict[str, Any] = {"candidates": len(cands)}
    items: dict[str, list[dict[str, Any]]] = {}
    pools: dict[str, list[list[str]]] = {}
    lm_corpus = {s: ngram_corpus(sentences, {k for c in splits[s] for k in c.synsets}) for s in splits}
    for split in ("train", "test"):  # train first: the test split's filter reads classifiers trained on it
        rng = random.Random(f"{task}:{split}:{seeds[split]}")
        cs = splits[split]
        pools[split] = candidate_distractors(cs, rng)
        table = option_counts(cs, pools[split], wn, counts)
        lms = fold_lms(lm_corpus[split], f"{task}:{split}:folds")
        gold_only = [_as_item(c, [c.gold], 0) for c in splits["train"]]
        if split == "train":
            first = choose(cs, pools[split], filter_readers(lms, table, gold_only, None), rng)
            provisional = assemble(cs, first, random.Random(0))
            # option-only classifiers cross-fitted on the provisional train items, then a second pass
            fold = [i % FOLDS for i in range(len(cs))]
            random.Random(f"{task}:oof").shuffle(fold)
            models = [bl.OptionOnly([it for it, g in zip(provisional, fold) if g != f]) for f in range(FOLDS)]

            def oof(items, models=models, fold=fold):
                scores = [m(items) for m in models]
                return [scores[fold[i]][i] for i in range(len(items))]

            chosen = choose(cs, pools[split], filter_readers(lms, table, gold_only, [oof]), rng)
        else:
            train_items = items["train"]
            parts = []
            for f in range(FOLDS):
                sub = random.Random(f"{task}:part:{f}").sample(train_items, (2 * len(train_items)) // 3)
                parts.append(bl.OptionOnly(sub))
            chosen = choose(cs, pools[split], filter_readers(lms, table, gold_only, parts), rng)
        if split == "test":  # the same pools without the filter (a random valid triple): what the filter adds
            draw = random.Random(f"{task}:unfiltered:{seeds['test']}")
            unfiltered = assemble(cs, [draw.sample(pool, K - 1) for pool in pools[split]], draw)
        items[split] = assemble(cs, chosen, rng)
        result[split] = {"items": len(cs), "clusters": len({c.unit for c in cs}), "ngram_corpus_sentences":
                         len(lm_corpus[split])}
        log(f"{task} {split}: {len(cs)} items")
    every = splits["train"] + splits["test"]
    counts_table = option_counts(every, pools["train"] + pools["test"], wn, counts)
    lm = bl.NgramLM(toks for _k, toks in lm_corpus["test"])
    result["baselines"] = bl.report(items["test"], items["train"], counts_table, lm, seeds["bootstrap"])
    result["baselines_unfiltered"] = bl.report(unfiltered, items["train"], counts_table, lm, seeds["bootstrap"])
    return {"items": items, "counts": counts_table, "info": result}


# -- sources, output ---------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def debian_version(package: str) -> str:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise wnr.SourceMissing(f"cannot ask dpkg for {package}'s version ({e}): the build runs on Debian") from e
    if out.returncode != 0 or not out.stdout.strip():
        raise wnr.SourceMissing(f"Debian package {package} is not installed (apt-get install {package})")
    return out.stdout.strip()


def wordnet_license() -> str:
    """The ``License: WordNet3.0`` paragraph of the package's copyright file, as plain text."""
    if not COPYRIGHT.is_file():
        raise wnr.SourceMissing(f"{COPYRIGHT} missing: install Debian's package {wnr.APT_PACKAGE}")
    text = COPYRIGHT.read_text(encoding="utf-8")
    m = re.search(r"^License: WordNet3\.0\n((?: .*\n)+)", text, re.MULTILINE)
    if m is None:
        raise SystemExit(f"no 'License: WordNet3.0' paragraph in {COPYRIGHT}")
    lines = [line[1:] for line in m.group(1).splitlines()]
    return "WordNet 3.0 license (from Debian's wordnet-base copyright file)\n\n" + "\n".join(
        "" if line == "." else line for line in lines).strip() + "\n"


def commonsense_record(task: str, item: dict[str, Any]) -> dict[str, str]:
    options = "".join(f"\n\nEnding{k + 1}: {o}" for k, o in enumerate(item["options"]))
    answer = f"ending{item['label'] + 1}"
    return {
        "instruction": f"Please choose the correct ending to complete the given sentence: {item['ctx']}{options}"
                       "\n\nAnswer format: " + "/".join(f"ending{k + 1}" for k in range(len(item["options"]))),
        "input": "",
        "output": f"the correct answer is {answer}",
        "answer": answer,
        "task": f"real_{task}",
        "cluster": item["cluster"],
    }


_YAML_HEADER = """\
# Generated by `python -m depthprune.real.mc_tasks build` -- do not edit.
# {what} from WordNet 3.0 (construction: depthprune/real/mc_tasks.py); data are local JSONL
# read by utils.py. Headline metric: acc (fixed with the construction, before any model ran).
"""
_WHAT = {"hypernym": "Noun hypernym ('A flask is a kind of' -> bottle)",
         "definition": "Definition -> word ('The word that means \"...\" is' -> palace)",
         "cloze": "Example-sentence cloze (an example up to its own lemma -> the lemma's form)"}


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")


def shipped_files(out: Path = OUT) -> list[Path]:
    return sorted(p for p in out.rglob("*")
                  if p.is_file() and p.name != "manifest.json" and "__pycache__" not in p.parts)


def build(out: Path = OUT, tasks: Sequence[str] = TASKS, seeds: dict[str, int] | None = None,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Read WordNet, build ``tasks``, write them and their manifest into ``out``; ``seeds`` override
    :data:`SEEDS` (split: the units' shuffle; test, train: each split's distractor draws, filter order
    and positions; bootstrap: the baselines' intervals)."""
    seeds = SEEDS | (seeds or {})
    root = wnr.require()
    version = debian_version(wnr.APT_PACKAGE)
    license_text = wordnet_license()
    wn = wnr.read(root)
    counts = corpus_counts(wn)
    sentences = corpus_sentences(wn)
    info: dict[str, Any] = {}
    records: list[dict[str, str]] = []
    baselines: dict[str, Any] = {}
    unfiltered: dict[str, Any] = {}
    for task in tasks:
        built = build_task(task, wn, counts, sentences, seeds, log)
        for split, items in built["items"].items():
            _write_jsonl(out / "data" / task / f"{split}.jsonl", items)
        _write_json(out / "data" / task / "counts.json", built["counts"])
        (out / f"real_{task}.yaml").write_text(multiple_choice_task(
            f"real_{task}", _YAML_HEADER.format(what=_WHAT[task]), "real_mc", f"load_{task}", "options"),
            encoding="utf-8")
        records += [commonsense_record(task, item) for item in built["items"]["train"]]
        baselines[f"real_{task}"] = built["info"].pop("baselines")
        unfiltered[f"real_{task}"] = built["info"].pop("baselines_unfiltered")
        info[f"real_{task}"] = built["info"]
    (out / "utils.py").write_text(loader_module(
        "Loaders for the real profile's WordNet multiple-choice tasks.\n\n"
        "Generated by `python -m depthprune.real.mc_tasks build` -- do not edit.\n"
        "Data are read relative to this file.\n", {t: t for t in tasks}), encoding="utf-8")
    _write_json(out / "commonsense" / "mc_train.json", records)
    _write_json(out / "baselines.json", {"split": "test", "interval": "95% percentile bootstrap over clusters, "
                                         f"{bl.BOOTSTRAP} resamples, seed {seeds['bootstrap']}",
                                         "tasks": baselines,
                                         "unfiltered": {"what": "the same test items and distractor pools, a "
                                                        "random valid triple per item instead of the filter's "
                                                        "(not shipped; for comparison)", "tasks": unfiltered}})
    (out / "LICENSE-WordNet.txt").write_text(license_text, encoding="utf-8")
    manifest = {
        "source": {"name": "WordNet 3.0", "debian_package": wnr.APT_PACKAGE, "version": version,
                   "license": "WordNet 3.0 license (LICENSE-WordNet.txt)",
                   "files": {str(p): _sha256(p) for p in [*(root / f for f in wnr.FILES), COPYRIGHT]}},
        "built_by": "python -m depthprune.real.mc_tasks build",
        "parameters": {"sizes": SIZES, "seeds": seeds, "k": K, "candidates": CANDIDATES, "triples": TRIPLES,
                       "folds": FOLDS, "cap": CAP, "min_corpus": MIN_CORPUS, "min_semcor": MIN_SEMCOR},
        "tasks": info,
        "commonsense/mc_train.json": {"records": len(records), "from": [f"real_{t} train split" for t in tasks]},
    }
    manifest["sha256"] = {p.relative_to(out).as_posix(): _sha256(p) for p in shipped_files(out)}
    _write_json(out / "manifest.json", manifest)
    return manifest


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune build wordnet-tasks``."""
    p.add_argument("--out", type=Path, default=OUT, help="output folder (default: the shipped one)")
    p.add_argument("--tasks", default=",".join(TASKS))
    for name, value in SEEDS.items():
        p.add_argument(f"--seed-{name}", type=int, default=value, help=f"default {value}")


def run(args: argparse.Namespace) -> int:
    """``depthprune build wordnet-tasks``: build into ``--out`` and print each task's counts."""
    seeds = {name: getattr(args, f"seed_{name}") for name in SEEDS}
    manifest = build(args.out, [t for t in args.tasks.split(",") if t], seeds, log=lambda s: print(s, file=sys.stderr))
    print(json.dumps(manifest["tasks"], indent=1))
    return 0
