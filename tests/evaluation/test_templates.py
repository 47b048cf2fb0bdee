"""lm-eval's prompt templates compiled once per evaluation (depthprune.evaluation.templates): the same
prompts as lm-eval's own rendering, each template compiled once, lm-eval's function put back."""

from __future__ import annotations

import pytest

pytest.importorskip("lm_eval")

from lm_eval import utils  # noqa: E402
from lm_eval.tasks import get_task_dict  # noqa: E402

from depthprune.data.profiles import get_profile  # noqa: E402
from depthprune.evaluation.templates import compiled_templates  # noqa: E402

DOCS_PER_TASK = 40  # lm-eval's own rendering compiles per document (~1 ms each): a sample of each task


def _shipped_tasks() -> list[tuple[str, object]]:
    out = []
    for name in ("tiny", "real"):  # the real profile's task folder holds the WordNet tasks too
        manager = get_profile(name).task_manager()
        out += sorted(get_task_dict(manager.all_subtasks, manager).items())
    return out


def _prompts(task, docs) -> list[tuple]:
    return [(task.doc_to_text(d), task.doc_to_target(d),
             task.doc_to_choice(d) if task.OUTPUT_TYPE == "multiple_choice" else None) for d in docs]


def test_every_shipped_task_gets_the_same_prompts_and_compiles_each_template_once(monkeypatch):
    tasks = _shipped_tasks()
    assert len(tasks) == 12  # the tiny profile's 7, the real profile's 2 and its 3 WordNet tasks
    compiles = []
    from_string = utils.env.from_string
    monkeypatch.setattr(utils.env, "from_string", lambda source: compiles.append(source) or from_string(source))
    for name, task in tasks:
        docs = list(task.eval_docs)[:DOCS_PER_TASK]
        stock = _prompts(task, docs)
        compiles.clear()
        with compiled_templates() as compiled:
            ours = _prompts(task, docs)
        assert ours == stock, name
        assert len(compiles) == len(set(compiles)) == len(compiled), name  # once per distinct template


def test_lm_eval_gets_its_own_function_back_even_after_an_error():
    original = utils.apply_template
    with pytest.raises(RuntimeError):
        with compiled_templates():
            assert utils.apply_template is not original
            raise RuntimeError
    assert utils.apply_template is original


def test_an_lm_eval_with_another_apply_template_is_left_alone(monkeypatch):
    def apply_template(template, doc, strict=True):  # not the (template, doc) this was written for
        return "stock"

    monkeypatch.setattr(utils, "apply_template", apply_template)
    with compiled_templates() as compiled:
        assert utils.apply_template is apply_template
        assert utils.apply_template("{{x}}", {"x": 1}) == "stock"
    assert compiled == {}
