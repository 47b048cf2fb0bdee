"""The WordNet multiple-choice tasks' splits and distractors: what makes the text alone useless.

Units go to disjoint test and train splits; every distractor is another item's answer of the same
slot, and an adversarial filter chooses each item's triple so that the model-free readers of
:mod:`depthprune.builders.model_free` (fresh instances of them: n-gram folds, option-only classifiers,
TF-IDF) stay at chance; :func:`build_task` runs it all for one task. The design and its reasons are
in :mod:`depthprune.builders.wordnet.tasks`, which writes the result.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from depthprune.builders import model_free as bl
from depthprune.builders.wordnet import reader as wnr
from depthprune.builders.wordnet.candidates import CANDIDATE_BUILDERS, Cand

K = 4
SIZES = {"test": 1200, "train": 500}
SEEDS = {"split": 0, "test": 1, "train": 2, "bootstrap": 0}
CANDIDATES = 24
TRIPLES = 64
FOLDS = 3
CAP = {"hypernym": 3, "definition": 1, "cloze": 2}
MIN_SLOT = 100  # a slot (part of speech, inflection) with fewer candidates is left out


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
    running count of gold wins closest to chance (:mod:`depthprune.builders.wordnet.tasks`). Readers score options alone."""
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
