"""Build the ``real`` profile's frozen data from Python's own documentation.

    depthprune build real data     # text splits  -> assets/real/data/{calibration,validation,test}.jsonl
    depthprune build real tasks    # lm-eval tasks + Commonsense-format records, from the frozen splits
    depthprune build real check    # measure the smollm2-135m card (depthprune measure card: --model for another)

Source. Every CPython ships its reference documentation's topic texts as
``pydoc_data.topics.topics`` (the text ``help("assert")`` prints): 79 documents, ~65k words
of English technical prose with code and grammar blocks, under the Python Software
Foundation License (recorded in ``manifest.json``; the license text ships beside the data).
The topics differ between Python versions, so the ``data`` stage is run once and its output
is *frozen*: the JSONL files are shipped, and ``manifest.json`` records the Python version
they came from and the sha256 of every shipped file (``tests/builders/test_python_docs.py`` checks them).
The ``tasks`` stage reads the frozen splits, never ``pydoc_data``, so it rebuilds the same
tasks on any interpreter.

Splits are by *document* (topic), never inside one -- and never between documents that
share text: many topics repeat whole paragraphs of others (``compound`` holds ``if``, ``for``,
``try``, ``function``, ``class``...; ``specialnames`` holds ``attribute-access``,
``numeric-types``...), so topics are first joined into *groups* (connected components of
"shares a prose paragraph of >= 8 words or an eligible sentence", below): 79 topics, 56
groups. The groups (ordered by their first topic's name) are shuffled with
``random.Random(0)`` and taken in that order into ``test`` until it holds >= 30% of the
words, then ``validation`` until >= 15%, the rest is ``calibration``; no sentence of one split
is in another. Every row carries its ``topic`` and its ``group`` (the group's first topic).
The ``real`` profile maps ``c4_train`` -> calibration, ``c4_validation`` -> validation,
``wikitext2`` -> test.

Tasks (the construction was fixed, and acc and acc_norm were both chosen for reporting,
before any model was run on them):

* ``real_lambada`` (LAMBADA-like last word), on the held-out documents (validation + test
  splits: the evaluation side; nothing is tuned on either). The prose of a document
  is cut into paragraphs (blocks with no indented line, no heading rule, no list bullet, no
  ``::=`` grammar and no ``>>>`` session) and sentences (split after ``.!?`` before a capital,
  quote or parenthesis). A *run* is a sequence of prose paragraphs with no other block between
  them. An item is a sentence of a run, with the whole preceding sentences of its run (at most
  120 words, at least one sentence) as its passage, whose last word (the sentence's final
  ``.!?`` removed) is alphabetic, has >= 4 letters and occurs earlier in the passage (case
  folded) -- LAMBADA's property that the word is recoverable from the context. The text is
  ``passage + " " + sentence`` without its final punctuation; the target is the last word,
  scored as lm-eval's ``lambada_openai`` does (acc: greedy, and ppl). A text that occurs
  twice (a paragraph repeated within a group) is kept once.
* ``real_nextsent`` (HellaSwag/StoryCloze-like next sentence, 4 options). A sentence is
  *eligible* with 5..50 words, a capital first letter and a final ``.``; footnote marks
  (``[3]``) are removed. Every three consecutive eligible sentences of a run make an item
  (overlapping windows: each item has its own true next sentence): the context is the first
  two, the true option the third, and the three distractors are eligible sentences of *other
  documents of the same split* (of other groups, and occurring nowhere in the item's own
  group), drawn with ``random.Random(seed)`` from those whose word count is within
  [0.75 n, 1.33 n] of the true sentence's n (all such sentences where fewer than 3 are),
  distinct; the gold position is drawn uniformly. An item whose context and true sentence
  repeat an earlier item's (a paragraph repeated within a group) is dropped. Split
  ``test`` comes from the held-out documents (validation + test splits), split ``train`` from the calibration
  documents (the margin objective), each with its own seed. lm-eval scores each option as the
  continuation of the context (``multiple_choice``; acc and acc_norm both reported; headline
  acc_norm, as for HellaSwag). The train split is also written in Commonsense-170k's record
  format (``commonsense/train.json``: ``Please choose the correct ending to complete the given
  sentence: <context>`` + ``EndingK: <option>`` lines + ``Answer format:
  ending1/ending2/ending3/ending4``, answer ``endingK``), so that ``answer="label"`` scores the
  listed option's label and ``answer="cloze"`` scores the option as the continuation of the
  context (the ``ending`` path of :func:`depthprune.data.sources.parse_commonsense_record`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from depthprune.common import jsonio
from depthprune.evaluation.task_files import lambada_task, loader_module, multiple_choice_task
from depthprune.model.registry import REAL_ASSETS

DATA = REAL_ASSETS / "data"
TASKS = REAL_ASSETS / "tasks"
HEALING = DATA / "healing"  # its own manifest (depthprune build healing real), not this one's
SPLITS = ("calibration", "validation", "test")
SPLIT_SEED = 0
FRACTIONS = {"test": 0.30, "validation": 0.15}  # of the words; the rest is calibration
TASK_SEEDS = {"test": 1, "train": 2}
LICENSE = ("Python Software Foundation License Version 2 (PSF-2.0): the Python documentation, "
           "Copyright (c) 2001 Python Software Foundation; All Rights Reserved")

_HEADING_RULE = re.compile(r"^[*=\-~^#]+$")
_SENTENCE_END = re.compile(r'(?<=[.!?])\s+(?=[A-Z"“(])')
_FOOTNOTE = re.compile(r"\s*\[\d+\]")
_WORD = re.compile(r"^[A-Za-z]{4,}$")


# -- stage data: the document splits ----------------------------------------------------------


def topics() -> dict[str, str]:
    """This interpreter's ``pydoc_data.topics.topics``, sorted by topic name."""
    from pydoc_data.topics import topics as raw

    return {name: raw[name] for name in sorted(raw)}


def document_groups(docs: dict[str, str]) -> dict[str, str]:
    """topic -> its group's name (the first topic of the group): topics joined where they share
    a prose paragraph of >= 8 words or an eligible sentence (union-find)."""
    parent = {t: t for t in docs}

    def find(t: str) -> str:
        while parent[t] != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    owner: dict[str, str] = {}
    for topic in sorted(docs):
        for run in prose_runs(docs[topic]):
            keys = [p for p in run if len(p.split()) >= 8]
            keys += [s for s in (_clean(x) for x in run_sentences(run)) if eligible(s)]
            for key in keys:
                if key in owner:
                    a, b = find(topic), find(owner[key])
                    if a != b:
                        parent[max(a, b)] = min(a, b)
                else:
                    owner[key] = topic
    members: dict[str, list[str]] = {}
    for topic in docs:
        members.setdefault(find(topic), []).append(topic)
    return {t: min(group) for group in members.values() for t in group}


def split_documents(docs: dict[str, str], seed: int = SPLIT_SEED) -> dict[str, list[str]]:
    """Topic names per split (module docstring: groups shuffled, test then validation by word share)."""
    group_of = document_groups(docs)
    groups = sorted(set(group_of.values()))
    random.Random(seed).shuffle(groups)
    total = sum(len(v.split()) for v in docs.values())
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    words = {s: 0 for s in SPLITS}
    for group in groups:
        topics_ = sorted(t for t, g in group_of.items() if g == group)
        target = next((s for s in ("test", "validation") if words[s] < FRACTIONS[s] * total), "calibration")
        out[target].extend(topics_)
        words[target] += sum(len(docs[t].split()) for t in topics_)
    return out


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_frozen_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """A frozen data or task file's rows (sorted keys, text as is), its folder made: every builder's one form."""
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_jsonl(path, rows, sort_keys=True, ensure_ascii=False)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return jsonio.read_jsonl(path)


def build_data() -> dict[str, Any]:
    docs = topics()
    split = split_documents(docs)
    group_of = document_groups(docs)
    info: dict[str, Any] = {}
    for name in SPLITS:
        rows = [{"topic": t, "group": group_of[t], "text": docs[t]} for t in sorted(split[name])]
        write_frozen_jsonl(DATA / f"{name}.jsonl", rows)
        info[name] = {"documents": len(rows), "groups": len({r["group"] for r in rows}),
                      "words": sum(len(r["text"].split()) for r in rows), "topics": [r["topic"] for r in rows]}
    license_src = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "LICENSE.txt"
    if license_src.is_file():
        (DATA / "LICENSE-PSF.txt").write_text(license_src.read_text(encoding="utf-8"), encoding="utf-8")
    import pydoc_data.topics as module

    header = Path(module.__file__).read_text(encoding="utf-8").splitlines()[:2]
    manifest = {
        "source": "pydoc_data.topics.topics (the topic texts of the Python reference documentation, "
                  "shipped with CPython)",
        "source_header": header,
        "python": sys.version.split()[0],
        "license": LICENSE,
        "documents": len(docs),
        "words": sum(len(v.split()) for v in docs.values()),
        "groups": len(set(group_of.values())),
        "split_rule": f"by document group (topics sharing text): groups shuffled with random.Random({SPLIT_SEED}); "
                      f"test until >= "
                      f"{FRACTIONS['test']:.0%} of the words, then validation until >= {FRACTIONS['validation']:.0%}, "
                      "the rest calibration",
        "splits": info,
    }
    _write_manifest(manifest)
    return manifest


def _write_manifest(manifest: dict[str, Any]) -> None:
    """``manifest.json`` with the sha256 of every shipped data and task-data file (``data/healing/`` excepted:
    the healing text has its own builder and manifest, :mod:`depthprune.builders.healing_text`)."""
    files = sorted(p for root in (DATA, TASKS / "data") if root.is_dir() for p in root.rglob("*")
                   if p.is_file() and p.name != "manifest.json" and HEALING not in p.parents)
    manifest["sha256"] = {p.relative_to(REAL_ASSETS).as_posix(): _sha256(p) for p in files}
    DATA.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(DATA / "manifest.json", manifest, sort_keys=False, ensure_ascii=False)


def read_manifest() -> dict[str, Any]:
    return jsonio.read_json(DATA / "manifest.json")


def frozen_split(name: str) -> list[dict[str, Any]]:
    """The shipped documents of one split (``topic``, ``text``)."""
    return read_jsonl(DATA / f"{name}.jsonl")


# -- prose, sentences ---------------------------------------------------------------------------


def _is_prose(lines: list[str]) -> bool:
    block = "\n".join(lines)
    return bool(lines) and not any(line[:1].isspace() for line in lines) \
        and not any(_HEADING_RULE.match(line.strip()) for line in lines) \
        and not lines[0].lstrip().startswith(("* ", "- ", "+ ")) and "::=" not in block and ">>>" not in block


def prose_runs(text: str) -> list[list[str]]:
    """Runs of consecutive prose paragraphs (each paragraph whitespace-normalised)."""
    runs: list[list[str]] = [[]]
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        if _is_prose(lines):
            runs[-1].append(" ".join(" ".join(lines).split()))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def run_sentences(run: list[str]) -> list[str]:
    return [s for paragraph in run for s in _SENTENCE_END.split(paragraph) if s]


def _clean(sentence: str) -> str:
    return " ".join(_FOOTNOTE.sub("", sentence).split())


def eligible(sentence: str) -> bool:
    n = len(sentence.split())
    return 5 <= n <= 50 and sentence[:1].isupper() and sentence.endswith(".")


# -- real_lambada -------------------------------------------------------------------------------


def lambada_items(docs: list[dict[str, Any]], max_words: int = 120) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    texts: set[str] = set()
    for doc in docs:
        for run in prose_runs(doc["text"]):
            sents = [_clean(s) for s in run_sentences(run)]
            for i in range(1, len(sents)):
                body = sents[i].rstrip(".!?")
                if body == sents[i] or not body:
                    continue
                words = body.split()
                target = words[-1]
                if len(words) < 2 or not _WORD.match(target):
                    continue
                passage: list[str] = []
                for prev in reversed(sents[:i]):
                    if passage and len(" ".join([prev, *passage]).split()) > max_words:
                        break
                    passage.insert(0, prev)
                context = " ".join(passage)
                if len(context.split()) > max_words:
                    continue
                seen = re.findall(r"[a-z]+", (context + " " + " ".join(words[:-1])).lower())
                if target.lower() not in seen:
                    continue
                text = f"{context} {body}"
                if text not in texts:
                    texts.add(text)
                    items.append({"text": text, "topic": doc["topic"]})
    return items


# -- real_nextsent ------------------------------------------------------------------------------


def nextsent_items(docs: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pool = [(doc["group"], s) for doc in docs for run in prose_runs(doc["text"])
            for s in (_clean(x) for x in run_sentences(run)) if eligible(s)]
    in_group: dict[str, set[str]] = {}
    for group, sentence in pool:
        in_group.setdefault(group, set()).add(sentence)
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for doc in docs:
        own = in_group.get(doc["group"], set())
        for run in prose_runs(doc["text"]):
            sents = [_clean(s) for s in run_sentences(run)]
            for i in range(len(sents) - 2):
                a, b, gold = sents[i : i + 3]
                if not all(eligible(s) for s in (a, b, gold)) or (f"{a} {b}", gold) in seen:
                    continue
                seen.add((f"{a} {b}", gold))
                n = len(gold.split())
                others = [s for g, s in pool if g != doc["group"] and s not in own and s != gold]
                near = [s for s in others if 0.75 * n <= len(s.split()) <= 1.33 * n]
                candidates = sorted(set(near if len(set(near)) >= 3 else others))
                distractors = rng.sample(candidates, 3)
                label = rng.randrange(4)
                endings = distractors[:label] + [gold] + distractors[label:]
                items.append({"ctx": f"{a} {b}", "endings": endings, "label": label, "topic": doc["topic"]})
    for k, item in enumerate(items):
        item["ind"] = k
    return items


def commonsense_record(item: dict[str, Any]) -> dict[str, str]:
    """A next-sentence item in Commonsense-170k's record format (HellaSwag-style endings)."""
    options = "".join(f"\n\nEnding{k + 1}: {e}" for k, e in enumerate(item["endings"]))
    answer = f"ending{item['label'] + 1}"
    return {
        "instruction": f"Please choose the correct ending to complete the given sentence: {item['ctx']}{options}"
                       "\n\nAnswer format: ending1/ending2/ending3/ending4",
        "input": "",
        "output": f"the correct answer is {answer}",
        "answer": answer,
    }


# -- stage tasks --------------------------------------------------------------------------------

_YAML_NEXTSENT = multiple_choice_task("real_nextsent", """\
# Generated by `depthprune build real tasks` -- do not edit.
# HellaSwag/StoryCloze-like next sentence on Python's documentation (construction:
# depthprune/builders/python_docs.py); data are local JSONL read by utils.py.
""", "real_zeroshot", "load_nextsent", "endings")

_YAML_LAMBADA = lambada_task("real_lambada", """\
# Generated by `depthprune build real tasks` -- do not edit.
# LAMBADA-like last word on Python's documentation (construction: depthprune/builders/python_docs.py);
# mirrors lm_eval/tasks/lambada/lambada_openai.yaml; data are local JSONL read by utils.py.
""")

_UTILS = loader_module(
    "Loaders for the real profile's lm-eval tasks.\n\n"
    "Generated by `depthprune build real tasks` -- do not edit.\n"
    "Data are read relative to this file, so the tasks load from any working directory:\n"
    "``lm_eval.tasks.TaskManager(include_path=<this dir>, include_defaults=False)``.\n",
    {"nextsent": "real_nextsent", "lambada": "real_lambada"})


def build_tasks() -> dict[str, Any]:
    # evaluation items come from every held-out document (validation + test: nothing is tuned on
    # either), calibration items from the calibration documents only
    test_docs = frozen_split("validation") + frozen_split("test")
    calib_docs = frozen_split("calibration")
    lambada = lambada_items(test_docs)
    nextsent = {"test": nextsent_items(test_docs, TASK_SEEDS["test"]),
                "train": nextsent_items(calib_docs, TASK_SEEDS["train"])}
    write_frozen_jsonl(TASKS / "data" / "real_lambada" / "test.jsonl", lambada)
    for split, items in nextsent.items():
        write_frozen_jsonl(TASKS / "data" / "real_nextsent" / f"{split}.jsonl", items)
    (TASKS / "real_nextsent.yaml").write_text(_YAML_NEXTSENT, encoding="utf-8")
    (TASKS / "real_lambada.yaml").write_text(_YAML_LAMBADA, encoding="utf-8")
    (TASKS / "utils.py").write_text(_UTILS, encoding="utf-8")
    records = [commonsense_record(item) for item in nextsent["train"]]
    (DATA / "commonsense").mkdir(parents=True, exist_ok=True)
    jsonio.write_json(DATA / "commonsense" / "train.json", records, indent=1, sort_keys=False, ensure_ascii=False)
    manifest = read_manifest()
    manifest["tasks"] = {
        "real_lambada": {"test": len(lambada), "seedless": True},
        "real_nextsent": {split: len(items) for split, items in nextsent.items()} | {"seeds": TASK_SEEDS},
        "commonsense/train.json": {"records": len(records), "from": "real_nextsent train split"},
    }
    _write_manifest(manifest)
    return manifest["tasks"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``depthprune build real``."""
    p.add_argument("stage", choices=("data", "tasks", "check", "all"))


def run(args: argparse.Namespace) -> int:
    """``depthprune build real STAGE``: the frozen splits and the tasks from them; the card (``check``) is the
    cards' measure, which the CLI runs after this (:mod:`depthprune.cli.build_real`): a builder does not call the
    cards that read its output."""
    if args.stage in ("data", "all"):
        m = build_data()
        print(json.dumps({k: {"documents": v["documents"], "words": v["words"]} for k, v in m["splits"].items()}))
    if args.stage in ("tasks", "all"):
        print(json.dumps(build_tasks()))
    return 0
