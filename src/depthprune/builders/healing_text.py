"""Build the healing text: what a pruned model is fine-tuned on (LoRA) after pruning, frozen per profile.

    depthprune build healing tiny   # -> assets/tiny/data/healing/{train.jsonl,manifest.json}
    depthprune build healing real   # -> assets/real/data/healing/{train.jsonl,manifest.json,LICENSE-debian-handbook.txt}

A healing text is a source of its own: disjoint from the calibration data of both objectives (the ppl
objective's text, the margin objective's items) and from every evaluation set, so that neither objective gets
its own data back after pruning and no evaluation measures text the model was healed on. Each folder's
``manifest.json`` records the source, its version, the licence, the rule that made it disjoint and what the
rule dropped, the counts (rows, characters, words) and the sha256 of ``train.jsonl``; the suite reads only the
frozen file, through :mod:`depthprune.data.healing_text`, which checks that sha256.

Tiny. The tiny models have their own tokenizer, so their healing text comes from their own corpus generator
(:mod:`depthprune.tiny.corpus`): the world of seed 0 (the shipped family's), a fresh document stream (seed
7000; the training corpora used 0 and 1000), training-split entities only (evaluation uses the held-out
ones), and the base mix without its ``tasks`` and ``commonsense`` genres, which render answered task items
and Commonsense-170k instruction records: the margin objective's and the evaluations' formats. A document
is dropped when it shares a paragraph (exact, whitespace-normalised, of >= 8 words) with the tiny calibration
files (``c4/train.jsonl``, ``commonsense/train.json``) or any evaluation file (``c4/validation.jsonl``,
``wikitext/*``, ``lambada/*``, ``tasks/data/**``); shorter paragraphs are the generator's headings and
one-line formulas (``= = History = =``, ``Work``), shared by construction and carrying no item. Documents
are drawn until the kept text holds >= 1.2 M characters. Licence: the suite's own (generated).

Real. The Debian Administrator's Handbook (Raphaël Hertzog, Roland Mas; Debian package ``debian-handbook``,
its English HTML), under GPL-2.0+ or CC-BY-SA-3.0 (the package's ``copyright`` file ships beside the data;
this adaptation is offered under CC-BY-SA-3.0). Why: modern English expository prose under a free licence,
of another domain (system administration) than the real profile's text (Python's reference documentation)
and its tasks' source (WordNet's glosses and examples). Extraction: the book's pages in its table of
contents' order, each page's prose paragraphs (``<div class="para">``; navigation, tables of contents,
tables, figures and every ``<pre>`` block -- screen listings, program listings -- dropped; inline code kept
as its text), whitespace-normalised, of >= 8 words; one row per page (``chapter``: its title, ``page``:
its file, ``text``: its paragraphs joined by blank lines). Disjointness: a paragraph is dropped when it
shares a 13-word n-gram (lower-cased words, punctuation stripped: GPT-3's decontamination rule) with any
text of the real profile -- every string of every JSON/JSONL file under ``assets/real/data`` (calibration,
calibration_pool, validation, test, commonsense) and ``assets/real/tasks`` (the WordNet tasks and the older
Python-docs tasks) -- or contains whole one of its texts of 8-12 words, or a task item's context followed
by its gold option (texts too short for a 13-gram: WordNet's glosses and examples). Pages are taken until
the text holds >= 1.5 M characters, or all of them where the book holds less.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from depthprune.builders.debian import SourceMissing, package_version
from depthprune.builders.python_docs import write_frozen_jsonl
from depthprune.common import jsonio
from depthprune.model.registry import REAL_ASSETS, TINY_ASSETS

STAGES = ("tiny", "real")
TRAIN, MANIFEST = "train.jsonl", "manifest.json"
OUT = {"tiny": TINY_ASSETS / "data" / "healing", "real": REAL_ASSETS / "data" / "healing"}
MIN_WORDS = 8  # a paragraph shorter than this is a heading or a formula, not text an overlap could leak

# -- tiny ---------------------------------------------------------------------------------------

TINY_WORLD_SEED = 0
TINY_STREAM_SEED = 7000  # the training corpora used 0 (base, continue) and 1000 (validation)
TINY_TARGET_CHARS = 1_200_000
#: the base mix's document weights without ``tasks`` and ``commonsense`` (:data:`depthprune.tiny.corpus.mixes.MIXES`)
TINY_MIX = {"life": 0.12, "journey": 0.10, "market": 0.06, "roster": 0.08, "article": 0.15, "web": 0.12, "qa": 0.13}
TINY_CALIBRATION = ("data/c4/train.jsonl", "data/commonsense/train.json")
TINY_EVALUATION = ("data/c4/validation.jsonl", "data/wikitext/*.jsonl", "data/lambada/*.jsonl",
                   "tasks/data/**/*.jsonl")


def _normal(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(text: str) -> list[str]:
    return [p for p in (_normal(b) for b in re.split(r"\n\s*\n", text)) if p]


def json_strings(obj: Any) -> Iterator[str]:
    """Every string inside a JSON value (keys excluded)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from json_strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from json_strings(value)


def _json_values(path: Path) -> list[Any]:
    return jsonio.read_jsonl(path) if path.suffix == ".jsonl" else [jsonio.read_json(path)]


def tiny_reference_files() -> list[Path]:
    """The tiny calibration and evaluation files the healing text must share no paragraph with."""
    files = [TINY_ASSETS / p for p in TINY_CALIBRATION]
    for pattern in TINY_EVALUATION:
        files += sorted(TINY_ASSETS.glob(pattern))
    return files


def tiny_reference_paragraphs() -> set[str]:
    """Every whitespace-normalised paragraph of >= 8 words in :func:`tiny_reference_files`."""
    return {p for f in tiny_reference_files() for value in _json_values(f) for s in json_strings(value)
            for p in _paragraphs(s) if len(p.split()) >= MIN_WORDS}


def tiny_documents(world: Any, seed: int = TINY_STREAM_SEED) -> Iterator[tuple[str, str]]:
    """An endless stream of (genre, document) of the healing mix, training-split entities: the corpus
    generator's own loop (:func:`depthprune.tiny.corpus.mixes.documents`) over :data:`TINY_MIX`."""
    from depthprune.tiny.corpus.mixes import GENRES

    rng = random.Random(f"corpus-{world.seed}-{seed}-healing-train")
    names = list(TINY_MIX)
    weights = [TINY_MIX[k] for k in names]
    while True:
        genre = rng.choices(names, weights=weights)[0]
        yield genre, GENRES[genre](world, rng, "train")


def tiny_rows(target_chars: int = TINY_TARGET_CHARS) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The tiny healing rows and what the overlap rule dropped."""
    from depthprune.tiny.world import World

    world = World(TINY_WORLD_SEED)
    reference = tiny_reference_paragraphs()
    rows: list[dict[str, str]] = []
    dropped: dict[str, int] = {}
    chars = drawn = 0
    for genre, doc in tiny_documents(world):
        if chars >= target_chars:
            break
        drawn += 1
        if any(p in reference for p in _paragraphs(doc) if len(p.split()) >= MIN_WORDS):
            dropped[genre] = dropped.get(genre, 0) + 1
            continue
        rows.append({"genre": genre, "text": doc})
        chars += len(doc)
    return rows, {"documents_drawn": drawn, "documents_dropped": sum(dropped.values()),
                  "dropped_by_genre": dict(sorted(dropped.items()))}


def build_tiny() -> dict[str, Any]:
    rows, drops = tiny_rows()
    out = OUT["tiny"]
    write_frozen_jsonl(out / TRAIN, rows)
    tokenizer = TINY_ASSETS / "tokenizer" / "tokenizer.json"
    manifest = {
        "source": "depthprune's tiny corpus generator (depthprune.tiny.corpus: GENRES), the tiny family's own "
                  "world and tokenizer",
        "version": {"world_seed": TINY_WORLD_SEED, "stream_seed": TINY_STREAM_SEED,
                    "rng": f"random.Random('corpus-{TINY_WORLD_SEED}-{TINY_STREAM_SEED}-healing-train')",
                    "entities": "train split", "mix": TINY_MIX,
                    "tokenizer_sha256": _sha256(tokenizer) if tokenizer.is_file() else None},
        "license": "the suite's own (generated text)",
        "why": "the tiny models read only their own tokenizer's text: a split of their own generator, a stream "
               "no training corpus used, without the genres that render task items and instruction records",
        "disjointness": {
            "rule": f"a document is dropped when it shares a whitespace-normalised paragraph of >= {MIN_WORDS} words "
                    "with a tiny calibration or evaluation file; documents drawn until the kept text holds >= "
                    f"{TINY_TARGET_CHARS} characters",
            "calibration": list(TINY_CALIBRATION), "evaluation": list(TINY_EVALUATION), **drops},
        **_counts(rows, out / TRAIN),
        "built_by": "depthprune build healing tiny",
    }
    jsonio.write_json(out / MANIFEST, manifest, sort_keys=False, ensure_ascii=False)
    return manifest


# -- real ---------------------------------------------------------------------------------------

HANDBOOK_PACKAGE = "debian-handbook"
HANDBOOK_DOC = Path("/usr/share/doc") / HANDBOOK_PACKAGE
HANDBOOK_HTML = HANDBOOK_DOC / "html" / "en-US"
HANDBOOK_LICENSE = "LICENSE-debian-handbook.txt"
REAL_TARGET_CHARS = 1_500_000
NGRAM = 13
LICENSE = ("GPL-2.0+ or CC-BY-SA-3.0 (the Debian package's copyright file, shipped beside the data as "
           f"{HANDBOOK_LICENSE}); this adaptation is offered under CC-BY-SA-3.0")
ATTRIBUTION = ("The Debian Administrator's Handbook, Copyright 2003-2015 Raphaël Hertzog, 2006-2015 Roland Mas, "
               "2013-2015 Freexian SARL; https://debian-handbook.info/. The original work has been modified: "
               "its prose paragraphs extracted as plain text, code and listings removed, paragraphs sharing text "
               "with the suite's real-profile data removed.")

_SKIP_TAGS = frozenset({"head", "pre", "table", "script", "style"})
_SKIP_CLASSES = frozenset({"toc", "docnav", "legalnotice", "mediaobject"})
_WORD = re.compile(r"[^\W_]+")


class _PageText(HTMLParser):
    """A handbook page's title and prose paragraphs (``div.para``; nested ones apart, in reading order)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._title: list[str] = []
        self._open: list[tuple[str, str]] = []  # (tag, role: skip / para / title / other)
        self._buffers: list[list[str]] = []
        self._skip = 0

    @property
    def title(self) -> str:
        return _normal("".join(self._title))

    def _flush(self) -> None:
        text = _normal("".join(self._buffers[-1]))
        if text:
            self.paragraphs.append(text)
        self._buffers[-1] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = set((dict(attrs).get("class") or "").split())
        role = "other"
        if tag == "title":
            role = "title"
        if tag in _SKIP_TAGS or classes & _SKIP_CLASSES:
            role, self._skip = "skip", self._skip + 1
        elif tag == "div" and "para" in classes and not self._skip:
            if self._buffers:
                self._flush()  # the outer paragraph's text so far comes first
            role = "para"
            self._buffers.append([])
        self._open.append((tag, role))

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            open_tag, role = self._open.pop()
            if role == "skip":
                self._skip -= 1
            elif role == "para":
                self._flush()
                self._buffers.pop()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if any(role == "title" for _, role in self._open):
            self._title.append(data)
        if self._buffers and not self._skip:
            self._buffers[-1].append(data)


def handbook_pages(root: Path = HANDBOOK_HTML) -> list[str]:
    """The handbook's page files in its table of contents' order (``index.html``'s links)."""
    index = root / "index.html"
    if not index.is_file():
        raise SourceMissing(f"{index} missing: install Debian's package {HANDBOOK_PACKAGE} "
                            f"(apt-get install {HANDBOOK_PACKAGE})")
    pages: list[str] = []
    for link in re.findall(r'href="([^"#/:]+\.html)', index.read_text(encoding="utf-8")):
        if link != "index.html" and link not in pages and (root / link).is_file():
            pages.append(link)
    return pages


def page_text(path: Path) -> tuple[str, list[str]]:
    """(title, prose paragraphs of >= 8 words) of one handbook page."""
    parser = _PageText()
    parser.feed(path.read_text(encoding="utf-8"))
    parser.close()
    return parser.title, [p for p in parser.paragraphs if len(p.split()) >= MIN_WORDS]


def words(text: str) -> list[str]:
    """Lower-cased words, punctuation stripped (the n-gram rule's words)."""
    return _WORD.findall(text.lower())


def ngrams(ws: list[str], n: int = NGRAM) -> set[str]:
    return {" ".join(ws[i:i + n]) for i in range(len(ws) - n + 1)}


def real_reference_files() -> list[Path]:
    """Every JSON/JSONL file of the real profile's data and tasks (the healing folder excepted)."""
    return sorted(p for root in (REAL_ASSETS / "data", REAL_ASSETS / "tasks") for p in root.rglob("*")
                  if p.suffix in (".json", ".jsonl") and p.is_file() and OUT["real"] not in p.parents)


def _completions(value: Any) -> Iterator[str]:
    """A task item's context followed by its gold option (what lm-eval scores), wherever one is inside ``value``."""
    if isinstance(value, dict):
        options = value.get("options", value.get("endings"))
        label = value.get("label")
        if isinstance(value.get("ctx"), str) and isinstance(options, list) and isinstance(label, int) \
                and 0 <= label < len(options) and isinstance(options[label], str):
            yield f"{value['ctx']} {options[label]}"
        for v in value.values():
            yield from _completions(v)
    elif isinstance(value, list):
        for v in value:
            yield from _completions(v)


def real_reference(files: Iterable[Path] | None = None) -> tuple[set[str], dict[int, set[str]]]:
    """The real profile's 13-grams, and its texts of 8-12 words by length (contained whole, they leak)."""
    grams: set[str] = set()
    short: dict[int, set[str]] = {}
    for f in real_reference_files() if files is None else files:
        for value in _json_values(f):
            for s in [*json_strings(value), *_completions(value)]:
                ws = words(s)
                grams |= ngrams(ws)
                if MIN_WORDS <= len(ws) < NGRAM:
                    short.setdefault(len(ws), set()).add(" ".join(ws))
    return grams, short


def leaks(paragraph: str, grams: set[str], short: dict[int, set[str]]) -> str | None:
    """Why ``paragraph`` shares text with the real profile (``ngram13``, ``short_text``), or None."""
    ws = words(paragraph)
    if not grams.isdisjoint(ngrams(ws)):
        return "ngram13"
    if any(not texts.isdisjoint(ngrams(ws, n)) for n, texts in short.items()):
        return "short_text"
    return None


def real_rows(root: Path = HANDBOOK_HTML, target_chars: int = REAL_TARGET_CHARS
              ) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The real healing rows and what the disjointness rule dropped."""
    grams, short = real_reference()
    rows: list[dict[str, str]] = []
    kept, dropped, examples = 0, {"ngram13": 0, "short_text": 0}, []
    chars = 0
    for page in handbook_pages(root):
        if chars >= target_chars:
            break
        title, paragraphs = page_text(root / page)
        keep = []
        for p in paragraphs:
            why = leaks(p, grams, short)
            if why is None:
                keep.append(p)
            else:
                dropped[why] += 1
                examples.append({"page": page, "rule": why, "paragraph": p[:200]})
        if keep:
            rows.append({"chapter": title, "page": page, "text": "\n\n".join(keep)})
            chars += len(rows[-1]["text"])
            kept += len(keep)
    return rows, {"paragraphs_kept": kept, "paragraphs_dropped": dropped, "dropped_examples": examples[:20],
                  "profile_ngrams": len(grams), "profile_short_texts": sum(len(v) for v in short.values())}


def build_real() -> dict[str, Any]:
    version = package_version(HANDBOOK_PACKAGE)
    copyright_file = HANDBOOK_DOC / "copyright"
    if not copyright_file.is_file():
        raise SourceMissing(f"{copyright_file} missing: install Debian's package {HANDBOOK_PACKAGE}")
    rows, drops = real_rows()
    out = OUT["real"]
    write_frozen_jsonl(out / TRAIN, rows)
    shutil.copyfile(copyright_file, out / HANDBOOK_LICENSE)
    copyright_lines = [line.strip() for line in copyright_file.read_text(encoding="utf-8").split("License:")[0]
                       .split("Copyright:", 1)[-1].splitlines() if line.strip()]
    files = [f.relative_to(REAL_ASSETS).as_posix() for f in real_reference_files()]
    manifest = {
        "source": f"The Debian Administrator's Handbook, Debian package {HANDBOOK_PACKAGE}: its English HTML "
                  f"({HANDBOOK_HTML})",
        "package": HANDBOOK_PACKAGE,
        "version": version,
        "license": LICENSE,
        "copyright": copyright_lines,
        "attribution": ATTRIBUTION,
        "why": "modern English expository prose under a free licence, of another domain (system administration) "
               "than the real profile's text (Python's reference documentation) and its tasks' source (WordNet)",
        "extraction": f"pages in the table of contents' order; each page's div.para paragraphs (no pre blocks, "
                      f"tables, tables of contents, navigation), whitespace-normalised, of >= {MIN_WORDS} words; one "
                      f"row per page; pages taken until >= {REAL_TARGET_CHARS} characters or the book's end",
        "disjointness": {
            "rule": f"a paragraph is dropped when it shares a {NGRAM}-word n-gram (lower-cased words, punctuation "
                    "stripped: GPT-3's decontamination rule) with any string of the files below, or contains whole "
                    f"one of their texts of {MIN_WORDS}-{NGRAM - 1} words or a task item's context with its gold option",
            "checked_against": files, **drops},
        **_counts(rows, out / TRAIN),
        "license_sha256": _sha256(out / HANDBOOK_LICENSE),
        "built_by": "depthprune build healing real",
    }
    jsonio.write_json(out / MANIFEST, manifest, sort_keys=False, ensure_ascii=False)
    return manifest


# -- both ---------------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _counts(rows: list[dict[str, str]], path: Path) -> dict[str, Any]:
    return {"rows": len(rows), "characters": sum(len(r["text"]) for r in rows),
            "words": sum(len(r["text"].split()) for r in rows), "file": TRAIN, "sha256": _sha256(path)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune build healing``."""
    p.add_argument("stage", choices=(*STAGES, "all"), help="which profile's healing text (all: both)")


def run(args: argparse.Namespace) -> int:
    """``depthprune build healing STAGE``: the frozen healing text of the tiny and/or real profile."""
    for stage, build in (("tiny", build_tiny), ("real", build_real)):
        if args.stage in (stage, "all"):
            m = build()
            print(json.dumps({stage: {k: m[k] for k in ("rows", "characters", "words", "sha256")}}))
    return 0
