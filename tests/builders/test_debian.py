"""builders/debian.py: a build step's Debian source, its version or an error naming the package."""

from __future__ import annotations

import shutil

import pytest

from depthprune.builders.debian import SourceMissing, package_version

needs_dpkg = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system (no dpkg-query)")


@needs_dpkg
def test_an_installed_package_has_its_version():
    assert package_version("dpkg")[0].isdigit()


@needs_dpkg
def test_a_missing_package_names_the_apt_line():
    with pytest.raises(SourceMissing, match=r"no-such-package-x .*apt-get install no-such-package-x"):
        package_version("no-such-package-x")


def test_without_dpkg_the_error_says_so(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(SourceMissing, match="cannot ask dpkg for wordnet-base's version"):
        package_version("wordnet-base")
