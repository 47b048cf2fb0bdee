""".ci/uv_settings.py: CI's uv gets the machine's pip settings (the CPU torch wheel is found through them)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("uv_settings", ROOT / ".ci" / "uv_settings.py")
uv_settings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_settings)

LISTING = """\
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
install.no-compile='1'
"""


def test_pip_settings_read_every_source_and_the_environment_wins():
    settings = uv_settings.pip_settings(LISTING)
    assert settings["find-links"] == ["/opt/wheels"]  # PIP_FIND_LINKS over the file's
    assert settings["extra-index-url"] == ["file:///opt/pypi/simple", "file:///opt/pypi-more/simple"]
    assert settings["constraint"] == ["/etc/xdg/pip/constraints.txt"] and settings["default-timeout"] == ["180"]


def test_exports_map_to_uv_with_its_separators_and_keep_what_the_caller_set():
    settings = uv_settings.pip_settings(LISTING + "global.find-links='/a /b'\n")
    lines = uv_settings.exports(settings, {"UV_HTTP_TIMEOUT": "30"})
    assert lines == [
        "export UV_INDEX_STRATEGY=unsafe-best-match",  # pip's rule: the best version over all indexes
        "export UV_EXTRA_INDEX_URL='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
        "export UV_FIND_LINKS=/opt/wheels",
        "export UV_CONSTRAINT=/etc/xdg/pip/constraints.txt",
    ]
    two_links = uv_settings.exports(uv_settings.pip_settings("global.find-links='/a /b'\n"), {})
    assert "export UV_FIND_LINKS=/a,/b" in two_links  # uv reads find-links comma-separated
    assert uv_settings.exports({}, {"UV_INDEX_STRATEGY": "first-index"}) == []


def _ci_cpu_lines() -> str:
    """The lines of .ci/run that say where CI ran (before anything is installed)."""
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("model="))
    end = next(i for i, line in enumerate(lines) if line.startswith('echo "ci: cpu'))
    return "\n".join(["set -euo pipefail", *lines[start:end + 1]])


def test_ci_says_which_cpu_it_proves_and_a_silent_lscpu_is_no_failure(tmp_path):
    """Every CI log starts with the CPU and its flags of interest; where lscpu prints nothing (or is missing),
    the line says so and CI goes on (DESIGN.md, "Machine probes")."""
    import subprocess

    out = subprocess.run(["bash", "-c", _ci_cpu_lines()], capture_output=True, text=True, check=True).stdout
    assert out.startswith("ci: cpu ") and "cores; flags of interest: " in out
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sed", "head", "grep", "tr", "nproc"):  # no lscpu
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (bare / tool).symlink_to(found)
    silent = subprocess.run(["/bin/bash", "-c", _ci_cpu_lines()], capture_output=True, text=True, check=True,
                            env={"PATH": str(bare)}).stdout
    assert silent.startswith("ci: cpu unknown (lscpu printed no model);")
