"""The one test a library function must pass before the suite stands in for it for one evaluation
(:mod:`depthprune.evaluation.templates`, :mod:`depthprune.evaluation.env_report`): it is there, and its parameters
are the ones the stand-in was written for. A library whose function changed runs unchanged, only slower."""

from __future__ import annotations

import inspect
from typing import Any


def has_function(module: Any, name: str, parameters: tuple[str, ...]) -> bool:
    """Whether ``module.name`` is a callable whose parameters are exactly ``parameters``."""
    original = getattr(module, name, None)
    if not callable(original):
        return False
    try:
        return tuple(inspect.signature(original).parameters) == parameters
    except (TypeError, ValueError):
        return False
