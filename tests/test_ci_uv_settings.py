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
