"""Every registered searcher's and objective's parameters are range-checked when built, so the CLI
rejects an out-of-range value (exit 2) before it loads a model."""

from __future__ import annotations

import dataclasses

import pytest

from depthprune.cli import main
from depthprune.objectives import OBJECTIVES, make_objective, objective_fields
from depthprune.search import SEARCHERS, get_searcher


def _numeric_fields(cls) -> list[str]:
    out = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else None
        hint = str(f.type)
        if f.name.startswith("_") or isinstance(default, bool) or "bool" in hint:
            continue
        if isinstance(default, (int, float)) or "int" in hint or "float" in hint:
            out.append(f.name)
    return out


@pytest.mark.parametrize("name", list(SEARCHERS))
def test_every_numeric_searcher_parameter_rejects_a_negative_value(name):
    fields = _numeric_fields(SEARCHERS[name])
    assert "max_evaluations" in fields
    for field in fields:
        with pytest.raises(ValueError, match=field):
            get_searcher(name, **{field: -5})


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_every_objective_parameter_rejects_a_bad_value(name):
    cls = OBJECTIVES[name]
    for field in objective_fields(name):
        bad = -5 if field in _numeric_fields(cls) else 12345  # a number where a name or a flag belongs
        with pytest.raises(ValueError, match=field):
            make_objective(name, "tiny", **{field: bad})


def _run(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    return code, capsys.readouterr().err


def test_prune_with_an_out_of_range_parameter_exits_2_before_loading(capsys, monkeypatch):
    import depthprune.recipe as recipe

    monkeypatch.setattr(recipe.Session, "open", classmethod(lambda *a, **k: pytest.fail("the model was loaded")))
    code, err = _run(capsys, ["prune", "--model", "tiny-llama3", "--objective", "ppl", "--search", "ga",
                              "--budget", "3", "--param", "max_evaluations=-5"])
    assert code == 2 and "max_evaluations must be an integer >= 1 or None, got -5" in err


def test_evaluate_refuses_a_layer_given_twice(capsys):
    code, err = _run(capsys, ["evaluate", "--model", "tiny-llama3", "--remove", "3,3"])
    assert code == 2 and "layer 3 given twice in '3,3'" in err
