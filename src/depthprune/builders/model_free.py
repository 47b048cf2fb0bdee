"""Model-free readers of a multiple-choice item: how far the text alone gets, per task.

A task whose answer a reader of surface features can pick measures the text, not a language
model. Each baseline here reads an item (its context and options, never a model) and gives
every option a score; the highest score is its choice, and a tie among the highest is broken
uniformly at random, so an item counts ``1/t`` when the gold option is one of ``t`` tied best
(``expected accuracy``). The baselines:

* ``position_k`` -- always option ``k``;
* ``longest``, ``shortest`` -- the option with the most / fewest characters;
* ``frequent_corpus``, ``rare_corpus`` -- the option whose word is most / least frequent in the
  source corpus (WordNet's glosses and examples); ``frequent_semcor``, ``rare_semcor`` -- the
  same by the SemCor tag count of the option's lemma (WordNet's ``cntlist.rev``);
* ``overlap`` -- the most content-word stems (Porter; scikit-learn's English stop words left
  out) shared with the context;
* ``tfidf_word``, ``tfidf_char`` -- the highest TF-IDF cosine between option and context, on
  words and on character 3..5-grams within words (scikit-learn, fitted on the task's train
  split: its contexts and options);
* ``option_only`` -- a classifier that sees the option alone: logistic regression on word and
  character 2..4-gram features of each option (scikit-learn), trained on the train split
  (gold options against the others);
* ``ngram``, ``ngram_norm`` -- a word trigram language model of the source corpus (nltk.lm,
  interpolated Witten-Bell; words seen once are ``<UNK>``) scoring the option as the
  continuation of the context: its log-probability, and that divided by the option's length
  in characters (as lm-eval's acc and acc_norm).

:func:`report` returns, per baseline, the expected accuracy on the test split, the chance level
``1/k`` and a 95% interval (percentile bootstrap over clusters: an item's ``cluster`` names the
source unit its item shares with others, so items are resampled a cluster at a time).
Everything but the n-gram model reads only the frozen task files; the n-gram model needs the
source corpus, which only the build reads (its numbers are frozen in ``baselines.json``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, lru_cache, partial
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json, read_jsonl

Item = Mapping[str, Any]
Scores = list[list[float]]

_WORD = re.compile(r"[a-z]+")
NGRAM_ORDER = 3
BOOTSTRAP = 1000
TIE = 1e-9


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@cache
def _stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    return _stemmer().stem(word)


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


def content_stems(text: str) -> frozenset[str]:
    stop = _stopwords()
    return frozenset(stem(w) for w in words(text) if w not in stop)


def related(a: str, b: str) -> bool:
    """Two words that share a morphological root, as far as spelling tells: equal Porter stems,
    one word (or its stem, 4+ letters) inside the other (``producing`` / ``unproductive``), or a
    common prefix of 5+ letters."""
    a, b = a.lower(), b.lower()
    if a == b or stem(a) == stem(b):
        return True
    for x, y in ((a, b), (b, a)):
        if any(len(part) >= 4 and part in y for part in (x, stem(x))):
            return True
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 5 and long_.startswith(short[:5])


# -- expected accuracy, intervals ------------------------------------------------------------


def expected_correct(scores: Sequence[float], label: int) -> float:
    best = max(scores)
    tied = [i for i, s in enumerate(scores) if s >= best - TIE]
    return 1.0 / len(tied) if label in tied else 0.0


def outcomes(items: Sequence[Item], scores: Scores) -> list[float]:
    return [expected_correct(s, int(item["label"])) for item, s in zip(items, scores, strict=True)]


def clustered_interval(values: Sequence[float], clusters: Sequence[str], seed: int = 0,
                       resamples: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of ``values``, resampling whole clusters."""
    import numpy as np

    names = sorted(set(clusters))
    index = {c: i for i, c in enumerate(names)}
    sums, counts = np.zeros(len(names)), np.zeros(len(names))
    for v, c in zip(values, clusters, strict=True):
        sums[index[c]] += v
        counts[index[c]] += 1
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names)))
    means = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def summary(values: Sequence[float], items: Sequence[Item], seed: int = 0) -> dict[str, float]:
    k = {len(item["options"]) for item in items}
    assert len(k) == 1, "every item of a task has the same number of options"
    lo, hi = clustered_interval(values, [item["cluster"] for item in items], seed)
    return {"acc": round(sum(values) / len(values), 6), "chance": round(1 / k.pop(), 6), "lo": round(lo, 6),
            "hi": round(hi, 6), "n": len(values)}


# -- readers ---------------------------------------------------------------------------------


def position(items: Sequence[Item], k: int) -> Scores:
    return [[1.0 if i == k else 0.0 for i in range(len(item["options"]))] for item in items]


def length(items: Sequence[Item], sign: float = 1.0) -> Scores:
    return [[sign * len(o) for o in item["options"]] for item in items]


def frequency(items: Sequence[Item], counts: Mapping[str, Mapping[str, int]], which: str,
              sign: float = 1.0) -> Scores:
    """``counts[which]["<pos>:<option>"]`` (``which``: corpus or semcor), as log(1 + count)."""
    table = counts[which]
    return [[sign * math.log1p(table[f"{item['pos']}:{o}"]) for o in item["options"]] for item in items]


def overlap(items: Sequence[Item]) -> Scores:
    out = []
    for item in items:
        ctx = content_stems(item["ctx"])
        out.append([float(len(ctx & content_stems(o))) for o in item["options"]])
    return out


class TfidfCosine:
    """Cosine between TF-IDF vectors of option and context (fitted on ``fit_items``' texts)."""

    def __init__(self, fit_items: Sequence[Item], analyzer: str):
        from sklearn.feature_extraction.text import TfidfVectorizer

        kwargs = {"analyzer": "char_wb", "ngram_range": (3, 5)} if analyzer == "char" else {"analyzer": "word"}
        texts = [item["ctx"] for item in fit_items] + [o for item in fit_items for o in item["options"]]
        self.vectorizer = TfidfVectorizer(lowercase=True, sublinear_tf=True, **kwargs).fit(texts)

    def __call__(self, items: Sequence[Item]) -> Scores:
        ctx = self.vectorizer.transform([item["ctx"] for item in items])
        opts = self.vectorizer.transform([o for item in items for o in item["options"]])
        out, j = [], 0
        for i, item in enumerate(items):
            k = len(item["options"])
            sims = opts[j : j + k] @ ctx[i].T
            out.append([float(x) for x in sims.toarray().ravel()])
            j += k
        return out


class OptionOnly:
    """Logistic regression on an option's own words and character n-grams: gold vs not."""

    def __init__(self, train_items: Sequence[Item]):
        from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline, make_union

        features = make_union(CountVectorizer(analyzer="word", binary=True),
                              TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True))
        texts = [o for item in train_items for o in item["options"]]
        labels = [int(i == int(item["label"])) for item in train_items for i in range(len(item["options"]))]
        self.model = make_pipeline(features, LogisticRegression(C=1.0, max_iter=5000)).fit(texts, labels)

    def __call__(self, items: Sequence[Item]) -> Scores:
        flat = self.model.decision_function([o for item in items for o in item["options"]])
        out, j = [], 0
        for item in items:
            k = len(item["options"])
            out.append([float(x) for x in flat[j : j + k]])
            j += k
        return out


class NgramLM:
    """A word trigram model of ``sentences`` (token lists): nltk.lm's interpolated Witten-Bell."""

    def __init__(self, sentences: Iterable[Sequence[str]], order: int = NGRAM_ORDER):
        from nltk.lm import Vocabulary, WittenBellInterpolated
        from nltk.lm.preprocessing import padded_everygram_pipeline

        sentences = [list(s) for s in sentences]
        self.order = order
        self.lm = WittenBellInterpolated(order, vocabulary=Vocabulary(
            (w for s in sentences for w in s), unk_cutoff=2))
        train, _ = padded_everygram_pipeline(order, sentences)
        self.lm.fit(train)
        self._cache: dict[tuple[str, ...], float] = {}

    def logprob(self, context: str, option: str) -> float:
        """log2 P(option's words | the context's last words)."""
        history = ["<s>"] * (self.order - 1) + words(context)
        total = 0.0
        for w in words(option):
            key = (*history[-(self.order - 1):], w)
            if key not in self._cache:
                self._cache[key] = self.lm.logscore(w, list(key[:-1]))
            total += self._cache[key]
            history.append(w)
        return total

    def __call__(self, items: Sequence[Item], norm: bool = False) -> Scores:
        return [[self.logprob(item["ctx"], o) / (len(o) if norm else 1) for o in item["options"]] for item in items]


def cheap_readers(train: Sequence[Item], counts: Mapping[str, Mapping[str, int]] | None,
                  fit: Sequence[Item] | None = None) -> dict[str, Callable[[Sequence[Item]], Scores]]:
    """Every baseline that needs only the frozen task files (name -> reader of items).

    Without ``counts`` the frequency readers are left out; TF-IDF is fitted on ``fit`` (default ``train``),
    and the option-only classifier, which needs labels, is there only with a ``train`` split."""
    fit = train if fit is None else fit
    k = len(fit[0]["options"])
    readers: dict[str, Callable[[Sequence[Item]], Scores]] = {
        f"position_{j}": partial(position, k=j) for j in range(k)}
    readers |= {"longest": lambda items: length(items, 1.0), "shortest": lambda items: length(items, -1.0)}
    if counts is not None:
        readers |= {
            "frequent_corpus": lambda items: frequency(items, counts, "corpus", 1.0),
            "rare_corpus": lambda items: frequency(items, counts, "corpus", -1.0),
            "frequent_semcor": lambda items: frequency(items, counts, "semcor", 1.0),
            "rare_semcor": lambda items: frequency(items, counts, "semcor", -1.0),
        }
    readers |= {"overlap": overlap, "tfidf_word": TfidfCosine(fit, "word"), "tfidf_char": TfidfCosine(fit, "char")}
    if train:
        readers["option_only"] = OptionOnly(train)
    return readers


def ngram_readers(lm: NgramLM) -> dict[str, Callable[[Sequence[Item]], Scores]]:
    return {"ngram": lambda items: lm(items), "ngram_norm": lambda items: lm(items, norm=True)}


def report(test: Sequence[Item], train: Sequence[Item], counts: Mapping[str, Mapping[str, int]],
           lm: NgramLM | None = None, seed: int = 0) -> dict[str, dict[str, float]]:
    """baseline -> {acc, chance, lo, hi, n} on ``test`` (cheap readers; the n-gram ones where ``lm`` is given)."""
    readers = cheap_readers(train, counts) | (ngram_readers(lm) if lm is not None else {})
    return {name: summary(outcomes(test, reader(test)), test, seed) for name, reader in readers.items()}


def read_items(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path)


def frozen_task(task_dir: Path, task: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(train, test, counts) of one frozen task (``<task_dir>/data/<task>/``)."""
    data = task_dir / "data" / task
    counts = read_json(data / "counts.json")
    return read_items(data / "train.jsonl"), read_items(data / "test.jsonl"), counts
