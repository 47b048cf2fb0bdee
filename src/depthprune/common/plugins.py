"""Registries by name that fill themselves: every module of a package registers its classes.

``SEARCHERS`` and ``OBJECTIVES`` are :class:`Registry` instances. A new searcher is one
file in ``depthprune/search/`` whose class carries ``@register``; :meth:`Registry.discover`
imports every module of the package, so nothing else has to be edited for the name to
appear in the CLI's help, the case-file validation, the report and the tests. Registering
a name twice is an error that names both classes (a silent overwrite would make the
suite measure a different algorithm than the one its name says).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Generic, TypeVar

T = TypeVar("T", bound=type)


def discover(package: str, skip: tuple[str, ...] = ("base",)) -> None:
    """Import every module of ``package`` but ``skip`` and private ones: registration happens on
    import, so this is what fills a registry (:class:`depthprune.common.plugins.Registry`'s classes, and
    the claims of :mod:`depthprune.report.claims`, which are instances)."""
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name in skip or info.name.startswith("_"):
            continue
        importlib.import_module(f"{package}.{info.name}")


class Registry(dict[str, T], Generic[T]):
    """``name -> class``; classes register themselves with :meth:`Registry.register`."""

    def __init__(self, kind: str, attr: str = "name") -> None:
        super().__init__()
        self.kind = kind
        self.attr = attr

    def register(self, cls: T) -> T:
        """Class decorator: make ``cls`` available under its ``name``; duplicates are refused."""
        name = getattr(cls, self.attr, "")
        if not name:
            raise ValueError(f"{self.kind} class {cls.__module__}.{cls.__qualname__} has no {self.attr}")
        other = self.get(name)
        if other is not None and other is not cls:
            raise ValueError(
                f"{self.kind} name {name!r} is registered twice: by {other.__module__}.{other.__qualname__} "
                f"and by {cls.__module__}.{cls.__qualname__}"
            )
        self[name] = cls
        return cls

    def discover(self, package: str, skip: tuple[str, ...] = ("base",)) -> None:
        """Import every module of ``package`` (they register themselves on import)."""
        discover(package, skip)

    def names(self) -> list[str]:
        """Registered names, sorted (for help texts and error messages)."""
        return sorted(self)

    def allowed(self) -> str:
        return ", ".join(self.names())
