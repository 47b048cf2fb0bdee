"""Calibration objectives by name.

    objective = make_objective("ppl", profile="tiny", n_samples=32)

Adding an objective is one file in this package whose class carries ``@register`` (from
:mod:`depthprune.objectives.base`); every module here is imported with the package, so
the new name is found without editing this file. Calibration sizes per data profile
are the profile's (:meth:`depthprune.data.profiles.Profile.objective_params`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from depthprune.data.profiles import Profile, get_profile
from depthprune.objectives.base import OBJECTIVES, Batch, Objective, register


def objective_fields(name: str) -> set[str]:
    """The parameter names objective ``name`` accepts."""
    return {f.name for f in dataclasses.fields(OBJECTIVES[name]) if not f.name.startswith("_")}


def make_objective(name: str, profile: str | Profile = "paper", **params: Any) -> Objective:
    """Instantiate objective ``name`` with the profile's defaults, then ``params`` (None = default)."""
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; allowed: {OBJECTIVES.allowed()}")
    allowed = objective_fields(name)
    merged = {**get_profile(profile).objective_params(name), **{k: v for k, v in params.items() if v is not None}}
    unknown = sorted(set(merged) - allowed)
    if unknown:
        raise ValueError(f"objective {name!r} has no parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return OBJECTIVES[name](**merged)


OBJECTIVES.discover(__name__)

__all__ = ["OBJECTIVES", "Batch", "Objective", "make_objective", "objective_fields", "register"]
