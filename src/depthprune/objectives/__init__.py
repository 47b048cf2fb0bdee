"""Calibration objectives by name.

    objective = make_objective("ppl", profile="tiny", n_samples=32)

Adding an objective is one small class in this package, registered with
:func:`register`. ``PROFILE_DEFAULTS`` holds the calibration sizes used for each data
profile (the paper's sizes for ``paper``; small ones for the CPU-sized tiny family).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from depthprune.objectives.base import Batch, Objective, OutputHead

OBJECTIVES: dict[str, type[Objective]] = {}

# Per-profile defaults. Tiny margin: the tiny models cannot read an option list in context
# (dense margin with answer="label" is ~0 over 512 items: -0.007..+0.015 loss, at chance),
# so they score options in cloze form, where the dense margin is clearly positive
# (loss -0.84..-1.24 over 256 items).
PROFILE_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "ppl": {"tiny": {"n_samples": 32, "seq_len": 128}},
    "margin": {"tiny": {"n_items": 128, "answer": "cloze"}},
    "kl": {"tiny": {"n_samples": 32, "seq_len": 128}},
}


def register(cls: type[Objective]) -> type[Objective]:
    OBJECTIVES[cls.name] = cls
    return cls


def make_objective(name: str, profile: str = "paper", **params: Any) -> Objective:
    """Instantiate objective ``name`` with the profile's defaults, then ``params``."""
    if name not in OBJECTIVES:
        raise ValueError(f"unknown objective {name!r}; allowed: {', '.join(sorted(OBJECTIVES))}")
    cls = OBJECTIVES[name]
    allowed = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    merged = {**PROFILE_DEFAULTS.get(name, {}).get(profile, {}), **{k: v for k, v in params.items() if v is not None}}
    unknown = sorted(set(merged) - allowed)
    if unknown:
        raise ValueError(f"objective {name!r} has no parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return cls(**merged)


for _optional in ("ppl", "margin", "kl"):
    try:
        _mod = __import__(f"depthprune.objectives.{_optional}", fromlist=["OBJECTIVE"])
        register(_mod.OBJECTIVE)
    except ModuleNotFoundError as _err:  # pragma: no cover - only while a module is absent
        if _err.name != f"depthprune.objectives.{_optional}":
            raise

__all__ = ["OBJECTIVES", "Batch", "Objective", "OutputHead", "make_objective", "register"]
