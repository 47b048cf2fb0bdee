"""lm-eval's prompt templates, compiled once per evaluation instead of once per document.

lm-eval renders a task's Jinja prompts (``doc_to_text``, ``doc_to_target``, ``doc_to_choice``)
with ``lm_eval.utils.apply_template``, which compiles the template string afresh on every call
(EleutherAI/lm-evaluation-harness#1286, open). A tiny-grid cell's two evaluations compiled
13,126 templates: 11 s of its 64 s on a 2-core CPU, more than the pruned model's forwards on
those tasks (docs/measurements.md). :func:`compiled_templates` puts in, for the length of one
evaluation, a function that compiles each distinct string once in lm-eval's own Jinja
environment (its filters, ``StrictUndefined``) and renders it as lm-eval does, then puts
lm-eval's own back. The prompts are the same strings (tests/evaluation/test_templates.py renders
the first 40 documents of every shipped task both ways). An lm-eval whose ``apply_template`` is
not the one this was written for runs unchanged, only slower.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from depthprune.evaluation.replacing import has_function

#: the signature of lm-eval's function that this one replaces (lm-eval 0.4.8 to 0.4.13 at least)
_EXPECTED_PARAMETERS = ("template", "doc")


def _replaceable(utils: Any) -> bool:
    """Whether ``utils`` (lm_eval.utils) has the Jinja environment and ``apply_template(template, doc)``
    that :func:`compiled_templates` is written for."""
    return hasattr(getattr(utils, "env", None), "from_string") and has_function(utils, "apply_template",
                                                                                  _EXPECTED_PARAMETERS)


@contextmanager
def compiled_templates() -> Iterator[dict[str, Any]]:
    """Within the block, lm-eval compiles each prompt template once. Yields the compiled templates
    by source string (empty, and lm-eval untouched, where its ``apply_template`` is not the expected one)."""
    from lm_eval import utils

    compiled: dict[str, Any] = {}
    if not _replaceable(utils):
        yield compiled
        return
    original: Callable[[str, dict], str] = utils.apply_template

    def apply_template(template: str, doc: dict) -> str:
        found = compiled.get(template)
        if found is None:
            found = compiled[template] = utils.env.from_string(template)
        return found.render(**doc)

    utils.apply_template = apply_template
    try:
        yield compiled
    finally:
        utils.apply_template = original
