"""The Debian packages a build step reads its sources from: their installed version, or an error that
names the package (``apt-get install``). The suite never calls this at run time: what it reads is frozen."""

from __future__ import annotations

import subprocess


class SourceMissing(SystemExit):
    """A source of the build is not on this machine (names the apt package)."""


def package_version(package: str) -> str:
    """``dpkg-query``'s version of the installed ``package``; :class:`SourceMissing` where it is not."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        raise SourceMissing(f"cannot ask dpkg for {package}'s version ({e}): the build runs on Debian") from e
    if out.returncode != 0 or not out.stdout.strip():
        raise SourceMissing(f"Debian package {package} is not installed (apt-get install {package})")
    return out.stdout.strip()
