"""Multiple-choice tasks for the ``real`` profile from WordNet 3.0, built so the text alone does not answer them.

    depthprune build wordnet-tasks            # reads Debian's wordnet-base, writes the frozen tasks
    depthprune build wordnet-tasks --out DIR  # the same into DIR (compare with the shipped files)
    depthprune build wordnet-tasks --seed-split 0 --seed-test 1 --seed-train 2 --seed-bootstrap 0   # the seeds (these defaults)

``real_nextsent`` leaks its answer: its distractors come from other documents, and a reader
of surface features picks the true ending far above chance. These three tasks ask for what a
language model knows about words, and each is built so that the model-free readers of
:mod:`depthprune.builders.model_free` stay at chance (1/4).

Source. WordNet 3.0 as Debian's ``wordnet-base`` ships it (``/usr/share/wordnet``: synsets,
glosses with their example sentences, hypernym pointers, sense order, SemCor tag counts in
``cntlist.rev``, the exception lists; read by :mod:`depthprune.builders.wordnet.reader`), under the
WordNet 3.0 licence (``LICENSE-WordNet.txt`` beside the data, from the package's copyright
file). The build refuses, naming the apt package, where the files are missing. Its output is
frozen in ``assets/real/tasks/mc/``; nothing at run time reads WordNet. ``manifest.json``
records the package's version, the sha256 of every source file read and of every shipped file.

Words. An answer or option is one lowercase alphabetic word of 3+ letters that a reader of
English plausibly knows: SemCor tagged one of its senses at least once, or it occurs at least
5 times in WordNet's own glosses and examples (the *corpus*). Two words are *related* where
their spelling shares a root (:func:`depthprune.builders.model_free.related`: equal Porter stems,
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
best). The filter baselines are the cheap readers of :mod:`depthprune.builders.model_free` and
*other instances* of the learned ones -- the n-gram model trained on each of ``FOLDS`` folds
of its corpus left out in turn, the option-only classifier trained on held-out folds of the
train split (for train items) or on resampled parts of it (for test items), TF-IDF fitted on the
answers only -- so the numbers reported (fresh instances: :func:`depthprune.builders.model_free.report`) are not
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
(``commonsense/mc_train.json``, HellaSwag-style endings as ``builders.python_docs`` writes them), each
record with its ``task`` and ``cluster``; ``answer="cloze"`` scores each option as the
continuation of the context, as lm-eval does.

Code. The candidate items of each task are :mod:`depthprune.builders.wordnet.candidates`; the splits,
distractor pools and adversarial filter, :mod:`depthprune.builders.wordnet.distractors`; this module reads the
sources and writes the frozen files (it re-exports the other two's names).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from depthprune.builders import model_free as bl
from depthprune.builders.debian import package_version
from depthprune.builders.python_docs import write_frozen_jsonl
from depthprune.builders.wordnet import reader as wnr
from depthprune.builders.wordnet.candidates import (
    CANDIDATE_BUILDERS,
    CONCRETE,
    MASS,
    MIN_CORPUS,
    MIN_SEMCOR,
    ONE_WORD,
    Cand,
    cloze_candidates,
    corpus_counts,
    corpus_sentences,
    definition_candidates,
    familiar,
    form_class,
    hypernym_candidates,
)
from depthprune.builders.wordnet.distractors import (
    CANDIDATES,
    CAP,
    FOLDS,
    MIN_SLOT,
    SEEDS,
    SIZES,
    TRIPLES,
    K,
    assemble,
    build_task,
    candidate_distractors,
    choose,
    filter_readers,
    fold_lms,
    ngram_corpus,
    option_counts,
    split_units,
)
from depthprune.common import jsonio
from depthprune.evaluation.task_files import loader_module, multiple_choice_task
from depthprune.model.registry import REAL_ASSETS

__all__ = ["CANDIDATES", "CANDIDATE_BUILDERS", "CAP", "CONCRETE", "COPYRIGHT", "FOLDS", "K", "MASS", "MIN_CORPUS",
           "MIN_SEMCOR", "MIN_SLOT", "ONE_WORD", "OUT", "SEEDS", "SIZES", "TASKS", "TRIPLES", "Cand", "add_arguments",
           "assemble", "build", "build_task", "candidate_distractors", "choose", "cloze_candidates",
           "commonsense_record", "corpus_counts", "corpus_sentences", "definition_candidates",
           "familiar", "filter_readers", "fold_lms", "form_class", "hypernym_candidates", "ngram_corpus",
           "option_counts", "run", "shipped_files", "split_units", "wordnet_license"]

OUT = REAL_ASSETS / "tasks" / "mc"
TASKS = ("hypernym", "definition", "cloze")
COPYRIGHT = Path("/usr/share/doc") / wnr.APT_PACKAGE / "copyright"


# -- sources, output ---------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
# Generated by `depthprune build wordnet-tasks` -- do not edit.
# {what} from WordNet 3.0 (construction: depthprune/builders/wordnet/tasks.py); data are local JSONL
# read by utils.py. Headline metric: acc (fixed with the construction, before any model ran).
"""
_WHAT = {"hypernym": "Noun hypernym ('A flask is a kind of' -> bottle)",
         "definition": "Definition -> word ('The word that means \"...\" is' -> palace)",
         "cloze": "Example-sentence cloze (an example up to its own lemma -> the lemma's form)"}


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(path, value, indent=1, ensure_ascii=False, default=None)


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
    version = package_version(wnr.APT_PACKAGE)
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
            write_frozen_jsonl(out / "data" / task / f"{split}.jsonl", items)
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
        "Generated by `depthprune build wordnet-tasks` -- do not edit.\n"
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
        "built_by": "depthprune build wordnet-tasks",
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
