"""The test a library function passes before the suite stands in for it (depthprune.evaluation.replacing)."""

from __future__ import annotations

from types import SimpleNamespace

from depthprune.evaluation.replacing import has_function


def test_only_the_function_with_the_expected_parameters_is_replaceable():
    def stock(template, doc):
        return ""

    def grown(template, doc, strict=True):
        return ""

    assert has_function(SimpleNamespace(f=stock), "f", ("template", "doc"))
    assert not has_function(SimpleNamespace(f=grown), "f", ("template", "doc"))
    assert not has_function(SimpleNamespace(f="not callable"), "f", ("template", "doc"))
    assert not has_function(SimpleNamespace(), "f", ("template", "doc"))
    assert not has_function(SimpleNamespace(f=print), "f", ("value",))  # a builtin, not the function expected
