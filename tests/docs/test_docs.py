"""The documentation's worked examples run: every ```python block of a page under docs/.

Each page's blocks run in order, as one program, in a fresh Python process (a searcher or an
objective a guide registers must not leak into this process's registries, which other tests
iterate) with a temporary working directory. The program is compiled with the page as its file
name and every block at its own line numbers, so a failure's traceback points at the page's line.
The site itself is built by ``tox -e docs`` (docs/conf.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: the guides that must hold worked examples (a page that loses its code blocks fails here)
GUIDES = ("extending/searcher.md", "extending/objective.md", "extending/model.md", "extending/task.md",
          "extending/claim.md")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, code) of every fenced block whose info string is exactly ``python``
    (MyST directives such as ```{code-block} and blocks of other languages are not run)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m["fence"], m["info"].strip(), i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].strip().startswith(fence)
                    and set(lines[j].strip()) == {fence[0]} and len(lines[j].strip()) >= len(fence)), len(lines))
        if info == "python":
            blocks.append((start + 1, "\n".join(lines[start:end])))
        i = end + 1
    return blocks


def program(text: str) -> str:
    """The page's python blocks at their own line numbers (blank lines elsewhere)."""
    out = [""] * (len(text.splitlines()) + 1)
    for first, code in python_blocks(text):
        for k, line in enumerate(code.splitlines()):
            out[first - 1 + k] = line
    return "\n".join(out) + "\n"


PAGES = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
               if "_build" not in p.parts and python_blocks(p.read_text(encoding="utf-8")))

RUNNER = ("import __main__, sys\n"
          "page = sys.argv[1]\n"
          "code = compile(open(sys.argv[2], encoding='utf-8').read(), page, 'exec')\n"
          "exec(code, __main__.__dict__)\n")


def test_every_guide_has_worked_examples() -> None:
    assert set(GUIDES) <= set(PAGES), f"guides without ```python blocks: {sorted(set(GUIDES) - set(PAGES))}"


def test_docs_environment_installs_the_docs_extra() -> None:
    """tox's docs environment installs no package (autoapi parses the source), so it lists the
    extra's requirements itself; the two lists must not drift apart."""
    import configparser

    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    root = DOCS.parent
    extra = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(root / "tox.ini")
    deps = [line.strip() for line in tox["testenv:docs"]["deps"].splitlines() if line.strip()]
    assert sorted(deps) == sorted(extra)
    assert "docs" not in tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]["all"][0]


def test_block_extraction() -> None:
    text = "# t\n\n```python\nx = 1\n```\n\n````md\n```python\nnot = run\n```\n````\n\n```{code-block} python\nno\n```\n"
    assert python_blocks(text) == [(4, "x = 1")]
    assert program(text).splitlines()[3] == "x = 1"


@pytest.mark.parametrize("page", PAGES)
def test_page_code_runs(page: str, tmp_path: Path) -> None:
    path = DOCS / page
    script = tmp_path / "page.py"
    script.write_text(program(path.read_text(encoding="utf-8")), encoding="utf-8")
    # one torch thread: the examples are small, and xdist workers share the cores (two threads per
    # process on two busy cores took 10x longer)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "DEPTHPRUNE_CACHE": str(tmp_path / "cache")}
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(path), str(script)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"the code of docs/{page} failed (exit {proc.returncode}):\n"
                                  f"{proc.stderr[-6000:]}\n--- stdout ---\n{proc.stdout[-2000:]}")
