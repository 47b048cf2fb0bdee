"""Data profiles: what "the paper's setting" and "the tiny family's setting" mean, in one place.

A :class:`Profile` answers every question whose answer depends on which data a model is
calibrated and evaluated on:

* where each named dataset comes from (``c4_train``, ``c4_validation``, ``wikitext2``,
  ``commonsense170k``) — :meth:`Profile.source`, honouring ``DEPTHPRUNE_DATA_<NAME>``;
* the calibration sizes each objective defaults to — :meth:`Profile.objective_params`;
* how a pruned model is evaluated — :meth:`Profile.eval_config`;
* which zero-shot tasks a model is evaluated on (``tasks``: the paper's six unless the profile
  has its own) and which metric of each is the headline one averaged into ``avg_acc``;
* which lm-eval task stands for each of them, and where local tasks live —
  :meth:`Profile.lm_eval_task`, :meth:`Profile.task_manager`;
* the micro-batch size of calibration forwards.

``paper`` is the paper's protocol (its sizes are the objectives' and EvalConfig's own
defaults); ``tiny`` is ours: CPU-sized calibration and evaluation on the shipped fixtures;
``real`` is ours too: a real pretrained model (``smollm2-135m``) on CPU, on real English text
(Python's documentation, frozen in ``assets/real``; :mod:`depthprune.builders.python_docs`) with two
tasks of its own. A model's registry entry names its profile; ``--profile`` overrides it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from depthprune.data.protocol import HEADLINE_METRIC, ZERO_SHOT_TASKS, EvalConfig
from depthprune.data.sources import TextSource
from depthprune.model.registry import REAL_ASSETS, TINY_ASSETS


@dataclass(frozen=True, eq=False)
class Profile:
    """One data profile (see the module docstring). Hashable by identity."""

    name: str
    description: str
    sources: Mapping[str, TextSource]
    objective_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    evaluation: Mapping[str, Any] = field(default_factory=dict)  # EvalConfig overrides
    batch_size: int = 8  # sequences per calibration micro-batch
    task_prefix: str = ""  # lm-eval task name = prefix + the paper's task name
    task_dir: Path | None = None  # local lm-eval tasks (include_path); None = lm-eval's own tasks
    stock_task_dirs: tuple[str, ...] = ()  # lm-eval's own task folders holding ``tasks`` (indexed alone)
    tasks: tuple[str, ...] = ZERO_SHOT_TASKS  # the zero-shot tasks allowed (evaluated unless default_tasks)
    default_tasks: tuple[str, ...] | None = None  # the tasks evaluated when a grid names none (None: tasks)
    headline: Mapping[str, str] = field(default_factory=lambda: dict(HEADLINE_METRIC))  # task -> metric; else acc

    def source(self, dataset: str) -> TextSource:
        """Where ``dataset`` comes from; ``DEPTHPRUNE_DATA_<NAME>`` points it at a local JSON file."""
        if dataset not in self.sources:
            raise ValueError(f"unknown dataset {dataset!r} in profile {self.name!r}; "
                             f"allowed: {', '.join(self.sources)}")
        src = self.sources[dataset]
        override = os.environ.get(f"DEPTHPRUNE_DATA_{re.sub(r'[^A-Z0-9]', '_', dataset.upper())}")
        if override:
            src = TextSource("json", split=src.split, data_files={src.split: override}, field=src.field,
                             limit=src.limit)
        return src

    def objective_params(self, objective: str) -> dict[str, Any]:
        """This profile's defaults for ``objective`` (empty: the objective's own, i.e. the paper's)."""
        return dict(self.objective_defaults.get(objective, {}))

    def eval_config(self, **overrides: Any) -> EvalConfig:
        """The evaluation settings of this profile, with ``overrides`` (None values ignored).

        ``tasks`` defaults to the profile's ``default_tasks`` (else its ``tasks``) and must be a
        subset of its ``tasks``.
        """
        values: dict[str, Any] = {"tasks": self.default_tasks or self.tasks, **self.evaluation,
                                  **{k: v for k, v in overrides.items() if v is not None}}
        unknown = sorted(set(values["tasks"]) - set(self.tasks))
        if unknown:
            raise ValueError(f"unknown task(s) {', '.join(unknown)} for profile {self.name!r}; "
                             f"allowed: {', '.join(self.tasks)}")
        values["tasks"] = tuple(values["tasks"])
        if "perplexity" in values:
            values["perplexity"] = tuple(values["perplexity"])
        return EvalConfig(**values)

    def headline_metric(self, task: str) -> str:
        """The metric of ``task`` that counts in ``avg_acc`` (acc unless the profile says otherwise)."""
        return self.headline.get(task, "acc")

    def lm_eval_task(self, task: str) -> str:
        """The lm-eval task that stands for the paper's ``task`` (``lambada`` included)."""
        base = "lambada_openai" if task == "lambada" and not self.task_prefix else task
        return f"{self.task_prefix}{base}"

    @cached_property
    def _task_manager(self):
        from lm_eval.tasks import TaskManager

        if self.task_dir is not None:
            return TaskManager(include_path=str(self.task_dir), include_defaults=False)
        if self.stock_task_dirs:
            import lm_eval

            root = Path(lm_eval.__file__).parent / "tasks"
            return TaskManager(include_path=[str(root / d) for d in self.stock_task_dirs], include_defaults=False)
        return self._every_stock_task

    @cached_property
    def _every_stock_task(self):
        from lm_eval.tasks import TaskManager

        return TaskManager()

    def task_manager(self, tasks: Iterable[str] = ()):
        """lm-eval's TaskManager for this profile's tasks (built once). Local tasks, and a profile's stock tasks
        where it names their folders (``stock_task_dirs``), are indexed alone: lm-eval's whole index of every
        stock task took 11-12 s per process, and the YAML files read are the same. A task outside those folders
        (``tasks``) gets the whole index."""
        manager = self._task_manager
        if self.task_dir is None and any(t not in manager.all_tasks for t in tasks):
            return self._every_stock_task
        return manager


def _local(path: Path, split: str = "train", field: str = "text", limit: int | None = None) -> TextSource:
    return TextSource("json", split=split, data_files={split: str(path)}, field=field, limit=limit)


_C4_REPO = "allenai/c4"

PAPER = Profile(
    name="paper",
    description="the paper's protocol: C4 / WikiText-2 / Commonsense-170k from the Hub, stock lm-eval tasks",
    sources={
        "c4_train": TextSource(_C4_REPO, data_files={"train": "en/c4-train.00000-of-01024.json.gz"}, split="train"),
        "c4_validation": TextSource(_C4_REPO, data_files={"validation": "en/c4-validation.00000-of-00008.json.gz"},
                                    split="validation", limit=1100),
        "wikitext2": TextSource("wikitext", name="wikitext-2-raw-v1", split="test"),
        # LLM-Adapters' commonsense_170k.json (instruction / input / output / answer).
        "commonsense170k": TextSource(
            "json",
            data_files={"train": "https://raw.githubusercontent.com/AGI-Edgerunners/LLM-Adapters/"
                                 "main/ft-training_set/commonsense_170k.json"},
            field="instruction",
        ),
    },
    # the paper's zero-shot tasks and lambada: hellaswag, winogrande, arc_easy, arc_challenge, piqa, boolq,
    # lambada_openai (tests/data/test_sources.py holds the folders to the tasks)
    stock_task_dirs=("hellaswag", "winogrande", "arc", "piqa", "super_glue/boolq", "lambada"),
    batch_size=8,
)

_TINY_DATA = TINY_ASSETS / "data"
TINY = Profile(
    name="tiny",
    description="ours: the tiny family's fixtures, CPU-sized calibration and evaluation, local lm-eval tasks",
    sources={
        "c4_train": _local(_TINY_DATA / "c4" / "train.jsonl"),
        "c4_validation": _local(_TINY_DATA / "c4" / "validation.jsonl", "validation", limit=1100),
        "wikitext2": _local(_TINY_DATA / "wikitext" / "test.jsonl", "test"),
        "commonsense170k": _local(_TINY_DATA / "commonsense" / "train.json", field="instruction"),
    },
    # Ours. Tiny margin: the tiny models cannot read an option list in context (dense margin
    # with answer="label" is ~0 over 512 items: -0.007..+0.015 loss, at chance), so they score
    # options in cloze form, where the dense margin is clearly positive (-0.84..-1.24, 256 items).
    objective_defaults={
        "ppl": {"n_samples": 32, "seq_len": 128},
        "margin": {"n_items": 128, "answer": "cloze"},
        "kl": {"n_samples": 32, "seq_len": 128},
    },
    evaluation={"seq_len": 256, "c4_windows": 64, "batch_size": 32},
    batch_size=32,
    task_prefix="tiny_",
    task_dir=TINY_ASSETS / "tasks",
)

_REAL_DATA = REAL_ASSETS / "data"
# Ours: the real grid's calibration (cases/real.toml, from the calibration-size curve): ppl 32 windows x 128
# tokens of calibration_pool (the sets stop moving there), margin 128 cloze items (they had not settled by
# 128, the paper's size and the largest measured), so `depthprune prune --model smollm2-135m` calibrates as a
# cell does. Margin in cloze form: smollm2-135m does not read listed options (dense, 128 train items:
# label form mean margin +0.025, accuracy 0.25 = chance; cloze +2.54, 0.68; model card).
REAL_OBJECTIVE_DEFAULTS: dict[str, dict[str, Any]] = {
    "ppl": {"dataset": "calibration_pool", "n_samples": 32, "seq_len": 128},
    "margin": {"n_items": 128, "answer": "cloze"},
    "kl": {"dataset": "calibration_pool", "n_samples": 32, "seq_len": 128},
}
# lm-eval's first 32 items per task, the validation split's perplexity over 8 x 256 tokens
REAL_EVALUATION: dict[str, Any] = {"perplexity": ("c4",), "seq_len": 256, "c4_windows": 8, "limit": 32,
                                   "batch_size": 8}
REAL = Profile(
    name="real",
    description=("ours: real pretrained models on CPU (smollm2-135m, gemma3-270m); Python's documentation "
                 "(pydoc_data.topics, frozen, split by document) as text; local lm-eval tasks from WordNet 3.0 "
                 "(real_hypernym, real_definition, real_cloze; the older real_nextsent and real_lambada kept for "
                 "the small smollm2 grid)"),
    sources={
        "c4_train": _local(_REAL_DATA / "calibration.jsonl"),
        # the calibration split plus Python's tutorial, HOWTOs and FAQ (depthprune.builders.calibration_pool): room for
        # disjoint calibration samples (the calibration-size curve, the real grid)
        "calibration_pool": _local(_REAL_DATA / "calibration_pool.jsonl"),
        "c4_validation": _local(_REAL_DATA / "validation.jsonl", "validation"),
        "wikitext2": _local(_REAL_DATA / "test.jsonl", "test"),
        # the WordNet tasks' train splits (disjoint clusters from their test splits) in Commonsense-170k's format
        "commonsense170k": _local(REAL_ASSETS / "tasks" / "mc" / "commonsense" / "mc_train.json", field="instruction"),
        # the next-sentence task's train split in the same format (the small smollm2 grid's margin data)
        "nextsent170k": _local(_REAL_DATA / "commonsense" / "train.json", field="instruction"),
    },
    objective_defaults=REAL_OBJECTIVE_DEFAULTS,
    evaluation=REAL_EVALUATION,
    batch_size=8,
    task_prefix="real_",
    task_dir=REAL_ASSETS / "tasks",
    tasks=("hypernym", "definition", "cloze", "nextsent"),
    # real_nextsent's distractors come from other documents, and a model-free reader of the text picks its
    # answer 70-81% of the time (chance 25%): it is no longer evaluated unless a grid names it
    default_tasks=("hypernym", "definition", "cloze"),
    # fixed with each task's construction, before any model ran on it: the WordNet tasks' one-word options
    # need no length normalisation (acc); the HellaSwag-like next sentence, acc_norm; the other recorded beside
    headline={"hypernym": "acc", "definition": "acc", "cloze": "acc", "nextsent": "acc_norm"},
)

PROFILES: dict[str, Profile] = {p.name: p for p in (PAPER, TINY, REAL)}


def get_profile(profile: str | Profile) -> Profile:
    """A :class:`Profile` by name (a Profile passes through)."""
    if isinstance(profile, Profile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise ValueError(f"unknown profile {profile!r}; allowed: {', '.join(PROFILES)}") from None
