"""Print ``export`` lines that give uv this machine's pip settings (for .ci/run).

CI's tox installs with uv (the tox-uv plugin), which reads its own settings, not pip's: a
machine whose pip finds the CPU torch wheel through ``find-links`` and a constraints file would
otherwise hand uv PyPI alone, and PyPI's torch is the multi-GB CUDA build. This reads pip's
effective configuration (``pip config list``: its files, then ``PIP_*`` variables, which win)
and maps each setting uv has an equivalent for. uv keeps the best version over all indexes,
as pip does (``UV_INDEX_STRATEGY=unsafe-best-match``); by default it stops at the first index
that has the package. A setting the caller already gave uv is left as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

#: pip's option -> (uv's variable, the separator uv reads between several values)
PIP_TO_UV = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "cert": ("SSL_CERT_FILE", " "),
    "default-timeout": ("UV_HTTP_TIMEOUT", " "),
}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """``pip config list``'s lines (``global.find-links='/opt/wheels'``, ``:env:.cert='...'``) -> option ->
    values. A ``PIP_*`` variable (``:env:``) replaces the files' value; ``install.`` beats ``global.``."""
    rank = {"global": 0, "install": 1, ":env:": 2}
    found: dict[str, tuple[int, list[str]]] = {}
    for line in listing.splitlines():
        match = re.fullmatch(r"(global|install|:env:)\.([\w-]+)=(.*)", line.strip())
        if not match:
            continue
        section, option, value = match.groups()
        values = shlex.split(value)
        values = [v for part in values for v in part.split()]  # one quoted value may hold several
        if option not in found or rank[section] >= found[option][0]:
            found[option] = (rank[section], values)
    return {option: values for option, (_, values) in found.items()}


def exports(settings: dict[str, list[str]], environ: dict[str, str]) -> list[str]:
    out = []
    if "UV_INDEX_STRATEGY" not in environ:
        out.append("export UV_INDEX_STRATEGY=unsafe-best-match")
    for option, (variable, sep) in PIP_TO_UV.items():
        if settings.get(option) and variable not in environ:
            out.append(f"export {variable}={shlex.quote(sep.join(settings[option]))}")
    return out


def main() -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             check=True).stdout
    print("\n".join(exports(pip_settings(listing), dict(os.environ))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
