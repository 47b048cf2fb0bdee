"""One CLI: every ``depthprune`` command answers ``--help`` (the tools' parsers are built lazily, so
this is what proves each tool module still registers its options), and the documents that tell a
reader what to run name ``depthprune`` commands, not the ``python -m`` modules they replaced."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.cli.tools import REHEARSAL, TOOLS

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = [["prune"], ["cell"], ["evaluate"], ["report"], ["archive"], ["verify"], ["durations"], ["time-split"],
            ["plan"], ["submit"], ["build"], ["measure"], ["rehearsal"], ["rehearsal", "build"], ["rehearsal", "env"],
            ["rehearsal", "run"]] + [[group, name] for group, tools in TOOLS.items() for name in tools]

#: ``python -m`` of any module but the CLI's own (``python -m depthprune.cli``: the same commands
#: where the package is not installed, as on the device machine).
OLD_ENTRY = re.compile(r"python3? -m depthprune(?!\.cli\b)")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_answers_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert f"usage: depthprune {' '.join(command)}" in capsys.readouterr().out


def test_every_former_tool_module_is_one_command():
    modules = [module for tools in TOOLS.values() for module, _ in tools.values()] + [REHEARSAL[0]]
    assert len(modules) == len(set(modules)) == 11  # the ten former `python -m` tools and `measure rivals`
    for module in modules:
        path = ROOT / "src" / (module.replace(".", "/") + ".py")
        text = path.read_text()
        assert "def add_arguments(" in text and "def run(" in text, module
        assert '__name__ == "__main__"' not in text, module
    assert not list((ROOT / "src" / "depthprune").rglob("__main__.py"))[1:], "only depthprune/cli/__main__.py"


def test_the_parser_imports_no_tool_module():
    """Built in a fresh process: the tools load when their command is parsed, so ``depthprune measure
    device`` runs without lm-eval or datasets (absent on the device machine)."""
    code = ("import sys; from depthprune.cli import build_parser; build_parser(); "
            "print(sorted(m for m in sys.modules if m in MODULES))").replace(
        "MODULES", repr({"lm_eval", "datasets", *(m for tools in TOOLS.values() for m, _ in tools.values()), REHEARSAL[0]}))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_docs_name_the_new_commands():
    files = [ROOT / "README.md", ROOT / "tox.ini", ROOT / ".ci" / "run", ROOT / "DESIGN.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    stale = [f"{f.relative_to(ROOT)}:{n}: {line.strip()}" for f in files if f.is_file()
             for n, line in enumerate(f.read_text().splitlines(), 1) if OLD_ENTRY.search(line)]
    assert not stale, "\n".join(stale)
