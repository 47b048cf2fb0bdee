"""Registries fill themselves from their package and refuse a name registered twice."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

from depthprune.common.plugins import Registry
from depthprune.objectives import OBJECTIVES
from depthprune.search import SEARCHERS
from depthprune.search.base import Searcher


def test_every_module_of_the_packages_registered_something() -> None:
    import pkgutil

    import depthprune.objectives as objectives
    import depthprune.search as search

    for package, registry in ((search, SEARCHERS), (objectives, OBJECTIVES)):
        modules = {m.name for m in pkgutil.iter_modules(package.__path__)} - {"base"}
        owners = {cls.__module__.rsplit(".", 1)[-1] for cls in registry.values()}
        assert modules == owners, f"modules that registered nothing: {sorted(modules - owners)}"


def test_a_duplicate_name_is_refused_with_both_classes() -> None:
    @dataclass
    class Impostor(Searcher):
        name: ClassVar[str] = "greedy"

        def run(self, ctx):  # pragma: no cover - never run
            return ()

    with pytest.raises(ValueError, match=r"'greedy' is registered twice: by depthprune\.search\.greedy\..* and by .*Impostor"):
        SEARCHERS.register(Impostor)
    assert SEARCHERS["greedy"].__name__ != "Impostor"


def test_a_nameless_class_is_refused() -> None:
    reg = Registry("thing")

    class Anon:
        name = ""

    with pytest.raises(ValueError, match="has no name"):
        reg.register(Anon)


def test_discover_imports_a_new_module_without_editing_anything(tmp_path, monkeypatch) -> None:
    pkg = tmp_path / "plugins_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "base.py").write_text("from depthprune.common.plugins import Registry\nREG = Registry('plugin')\n")
    (pkg / "shiny.py").write_text("from plugins_pkg.base import REG\n@REG.register\nclass Shiny:\n    name = 'shiny'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plugins_pkg.base as base

    assert base.REG.names() == []
    base.REG.discover("plugins_pkg")
    assert base.REG.names() == ["shiny"]
    for mod in [m for m in sys.modules if m.startswith("plugins_pkg")]:
        monkeypatch.delitem(sys.modules, mod)


def test_cli_help_lists_the_registered_names() -> None:
    from depthprune.cli import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["prune"].format_help()
    for name in SEARCHERS.names() + OBJECTIVES.names():
        assert name in text
