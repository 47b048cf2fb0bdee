"""The ``utils.py`` written beside a profile's local lm-eval task YAMLs.

lm-eval imports that file by path (``!function utils.load_x``), so it must stand alone: no
import of depthprune. The tiny and real builders both write it from :func:`loader_module`,
which is the one place its loading code lives.
"""

from __future__ import annotations

from collections.abc import Mapping

_LOADER = '''
import json
import os

import datasets

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load(name):
    splits = {}
    for split in ("train", "validation", "test"):
        path = os.path.join(_HERE, "data", name, split + ".jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                splits[split] = datasets.Dataset.from_list([json.loads(line) for line in f if line.strip()])
    return datasets.DatasetDict(splits)
'''


def loader_module(docstring: str, loaders: Mapping[str, str], tail: str = "") -> str:
    """Source of a standalone ``utils.py``: ``load_<key>()`` reads ``data/<value>/<split>.jsonl``."""
    functions = "".join(f"\n\ndef load_{key}(**kwargs):\n    return _load({name!r})\n".replace("'", '"')
                        for key, name in loaders.items())
    return f'"""{docstring}"""\n{_LOADER}{functions}{tail}'


_LAMBADA = """tag:
  - {name}_group
task: {name}
custom_dataset: !function utils.load_lambada
output_type: loglikelihood
test_split: test
doc_to_text: "{{{{text.split(' ')[:-1]|join(' ')}}}}"
doc_to_target: "{{{{' '+text.split(' ')[-1]}}}}"
should_decontaminate: true
doc_to_decontamination_query: "{{{{text}}}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def lambada_task(name: str, header: str) -> str:
    """A LAMBADA-style task YAML (lm-eval's lambada_openai.yaml, on local data read by utils.py)."""
    return header + _LAMBADA.format(name=name)


#: lm-eval metric lists of a multiple-choice task: acc and acc_norm, or acc alone (the tiny and real task YAMLs)
METRICS_ACC_NORM = """metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
"""
METRICS_ACC = """metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""

_MULTIPLE_CHOICE = """tag:
  - {tag}
task: {name}
custom_dataset: !function utils.{loader}
output_type: multiple_choice
training_split: train
validation_split: null
test_split: test
doc_to_text: "{{{{ctx}}}}"
doc_to_target: "{{{{label}}}}"
doc_to_choice: "{{{{{choices}}}}}"
""" + METRICS_ACC_NORM + """metadata:
  version: 1.0
"""


def multiple_choice_task(name: str, header: str, tag: str, loader: str, choices: str) -> str:
    """A local multiple-choice task YAML: ``ctx`` scored against each of ``choices`` (a document
    field), answer ``label``; acc and acc_norm both recorded."""
    return header + _MULTIPLE_CHOICE.format(name=name, tag=tag, loader=loader, choices=choices)
