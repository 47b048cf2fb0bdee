"""Model-free baselines of any lm-eval task a profile ships: what a reader of the text alone scores.

A task measures the model only if readers that see no model stay near chance. The WordNet tasks'
builder freezes a richer set (:mod:`depthprune.builders.model_free`, with corpus frequencies and an n-gram
model of their source, which only the build reads). Every task is read here through lm-eval's own
task definition (``doc_to_text`` / ``doc_to_choice`` / ``doc_to_target``, winogrande's partial
scoring included), so the items are the ones a model is scored on:

* multiple choice: the readers of :func:`depthprune.builders.model_free.cheap_readers` that need no corpus
  counts -- every position, longest, shortest, content-word overlap, TF-IDF on words and on
  characters (fitted on the task's train split, else on its own texts without labels), and the
  option-only classifier (only where the task has a train split with its labels);
* open cloze (``loglikelihood`` tasks such as LAMBADA, scored by whether the target is the greedy
  continuation): the copy readers of Paperno et al. (2016, the LAMBADA paper) -- a random word of the
  passage, a random capitalised word of the passage, the passage's most frequent content word -- and,
  as chance, a random word of the task's vocabulary (every word of its passages and targets).

Accuracies are expected ones (a tie among the best counts 1/t; a random pick among w words counts 1/w
when the target is one of them), with a 95% percentile bootstrap over the task's clusters (an item is
its own cluster where the documents name none). ``depthprune build task-baselines`` writes
them for every shipped task (:data:`SHIPPED`) to :data:`FROZEN`, which REPORT shows; a test rebuilds
them and compares, so the file cannot go stale.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from depthprune.builders import model_free as bl
from depthprune.common import jsonio

#: profile -> its lm-eval tasks (the paper's names) read here; the real WordNet tasks have the richer
#: frozen set of their builder (depthprune/assets/real/tasks/mc/baselines.json) instead
SHIPPED: dict[str, tuple[str, ...]] = {
    "tiny": ("arc_easy", "arc_challenge", "boolq", "hellaswag", "piqa", "winogrande", "lambada"),
    "real": ("nextsent", "lambada"),
}
FROZEN = Path(__file__).resolve().parents[1] / "assets" / "task_baselines.json"
SEED = 0

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


@dataclass(frozen=True)
class TaskBaselines:
    """One task's readers: name -> {acc, chance, lo, hi, n}."""

    task: str
    kind: str  # "multiple_choice" or "cloze"
    split: str
    readers: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def chance(self) -> float:
        return chance(self.readers)

    def best(self) -> tuple[str, Mapping[str, float]]:
        return best(self.readers)


def chance(readers: Mapping[str, Mapping[str, float]]) -> float:
    """A task's chance level (every reader of a task records the same)."""
    return next(iter(readers.values()))["chance"]


def best(readers: Mapping[str, Mapping[str, float]]) -> tuple[str, Mapping[str, float]]:
    """The reader with the highest accuracy (ties: the first by name)."""
    return max(sorted(readers.items()), key=lambda kv: kv[1]["acc"])


def _label(task, doc: Mapping[str, Any], choices: Sequence[str]) -> int:
    target = task.doc_to_target(doc)
    if isinstance(target, str):
        target = int(target) if target.strip().isdigit() else list(choices).index(target)
    return int(target)


def mc_items(task, docs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """lm-eval multiple-choice docs -> items {ctx, options, label, cluster} as a model is scored on them.

    Where ``doc_to_text`` gives an index (winogrande's partial scoring: each option is a context and
    the scored text is the shared continuation), the continuation is the item's context."""
    items = []
    for i, doc in enumerate(docs):
        text, choices = task.doc_to_text(doc), list(task.doc_to_choice(doc))
        if isinstance(text, int):
            ctx, label = str(task.doc_to_target(doc)), text
        else:
            ctx, label = str(text), _label(task, doc, choices)
        items.append({"ctx": ctx, "options": [str(c) for c in choices], "label": label,
                      "cluster": str(doc.get("cluster", i))})
    return items


def mc_report(test: Sequence[dict[str, Any]], train: Sequence[dict[str, Any]], seed: int = 0) -> dict[str, dict[str, float]]:
    """Every corpus-free reader on ``test`` (TF-IDF fitted on ``train``, else on ``test``'s texts; the
    option-only classifier only with a ``train`` split)."""
    readers = bl.cheap_readers(train, None, fit=train or test)
    return {name: bl.summary(bl.outcomes(test, reader(test)), test, seed) for name, reader in readers.items()}


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def _pick(candidates: Iterable[str], target: str) -> float:
    """Expected accuracy of a uniform pick among the distinct ``candidates``."""
    pool = set(candidates)
    return 1.0 / len(pool) if target in pool else 0.0


def cloze_outcomes(items: Sequence[tuple[str, str]]) -> dict[str, list[float]]:
    """(passage, target word) pairs -> reader -> expected outcome per item."""
    stop = bl._stopwords()
    vocabulary = {w for passage, target in items for w in (*words(passage), target)}
    out: dict[str, list[float]] = {"passage_word": [], "passage_capitalised": [], "passage_frequent": [],
                                   "vocabulary_word": []}
    for passage, target in items:
        seen = words(passage)
        out["passage_word"].append(_pick(seen, target))
        out["passage_capitalised"].append(_pick((w for w in seen if w[0].isupper()), target))
        counts = Counter(w for w in seen if w.lower() not in stop)
        top = max(counts.values(), default=0)
        out["passage_frequent"].append(_pick((w for w, c in counts.items() if c == top), target))
        out["vocabulary_word"].append(_pick(vocabulary, target))
    return out


def cloze_report(items: Sequence[tuple[str, str]], clusters: Sequence[str], seed: int = 0) -> dict[str, dict[str, float]]:
    outcomes = cloze_outcomes(items)
    chance = sum(outcomes["vocabulary_word"]) / len(items)
    report = {}
    for name, values in outcomes.items():
        lo, hi = bl.clustered_interval(values, clusters, seed)
        report[name] = {"acc": round(sum(values) / len(values), 6), "chance": round(chance, 6), "lo": round(lo, 6),
                        "hi": round(hi, 6), "n": len(values)}
    return report


def task_baselines(task_name: str, task, seed: int = 0) -> TaskBaselines:
    """The baselines of one built lm-eval task (``lm_eval.tasks.get_task_dict``'s value)."""
    docs = list(task.eval_docs)
    split = task.config.test_split or task.config.validation_split or "eval"
    if task.OUTPUT_TYPE == "multiple_choice":
        train = mc_items(task, task.training_docs()) if task.has_training_docs() else []
        return TaskBaselines(task_name, "multiple_choice", split, mc_report(mc_items(task, docs), train, seed))
    if task.OUTPUT_TYPE == "loglikelihood":
        pairs = [(str(task.doc_to_text(d)), str(task.doc_to_target(d)).strip()) for d in docs]
        clusters = [str(d.get("cluster", i)) for i, d in enumerate(docs)]
        return TaskBaselines(task_name, "cloze", split, cloze_report(pairs, clusters, seed))
    raise ValueError(f"{task_name}: output_type {task.OUTPUT_TYPE!r} has no model-free baselines here "
                     "(allowed: multiple_choice, loglikelihood)")


def profile_baselines(profile, tasks: Sequence[str] | None = None, seed: int = 0) -> list[TaskBaselines]:
    """Every lm-eval task of ``profile`` (its tasks and LAMBADA unless ``tasks`` names the paper's tasks)."""
    from lm_eval.tasks import get_task_dict

    names = [profile.lm_eval_task(t) for t in (tasks if tasks is not None else (*profile.tasks, "lambada"))]
    built = get_task_dict(names, profile.task_manager())
    return [task_baselines(name, built[name], seed) for name in names]


def build(seed: int = SEED) -> dict[str, Any]:
    """The frozen file's content: every :data:`SHIPPED` task's baselines, with how they were made."""
    import lm_eval

    from depthprune.data.profiles import PROFILES

    tasks = {}
    for profile, names in SHIPPED.items():
        for tb in profile_baselines(PROFILES[profile], names, seed):
            tasks[tb.task] = {"profile": profile, **asdict(tb)}
    return {"generated_by": "depthprune build task-baselines", "lm_eval": lm_eval.__version__,
            "seed": seed, "interval": f"95% percentile bootstrap over clusters, {bl.BOOTSTRAP} resamples, seed {seed}",
            "tasks": tasks}


def load(path: Path = FROZEN) -> dict[str, Any]:
    return jsonio.read_json(path)


def dumps(data: dict[str, Any]) -> str:
    """The frozen file's text for ``data`` (what ``build`` writes and ``check`` compares)."""
    return jsonio.dumps(data, indent=1)


def stale(path: Path, data: dict[str, Any]) -> bool:
    """Whether ``path`` is not what ``data`` (a rebuild) would write."""
    return not path.is_file() or path.read_text(encoding="utf-8") != dumps(data)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``depthprune build task-baselines``."""
    parser.add_argument("action", nargs="?", choices=("build", "check"), default="build",
                        help="build (default): write the frozen file; check: rebuild and compare with it "
                             "(exit 1 if it differs)")
    parser.add_argument("--out", type=Path, default=FROZEN, help=f"the frozen file (default: {FROZEN.name} in the package)")


def run(args: argparse.Namespace) -> int:
    """``depthprune build task-baselines [build|check]``: write the frozen file, or say whether it is stale."""
    data = build()
    if args.action == "build":
        args.out.write_text(dumps(data), encoding="utf-8")
        print(f"wrote {args.out} ({len(data['tasks'])} tasks)")
        return 0
    if stale(args.out, data):
        print(f"{args.out}: differs from a rebuild; run depthprune build task-baselines", file=sys.stderr)
        return 1
    print(f"{args.out}: matches a rebuild ({len(data['tasks'])} tasks)")
    return 0
