"""How far CI's heal moves on other float32 kernels: a band measured for healing, per pair of kernel classes.

Measured by ``depthprune measure healing-band`` (:mod:`depthprune.healing.band_heals`).

CI's heal (:mod:`depthprune.healing.reference`) is checked exactly where this machine's kernels are the
reference's. Elsewhere its rounding compounds over its training steps, which the forward bands of
:mod:`depthprune.verify.bands` do not measure; so a healing band of its own, by this rule, written on 2026-12-07
before any measuring heal ran:

* **The measuring heals**: tiny-llama3's distinct removed sets of the tiny grid (``archive/``), CI's set left
  out, in order of size then blocks, the first :data:`MEASURING`; each healed exactly as CI's set is (the same
  configuration, thread count and probe windows), once on each of the two kernel classes.
* **The band**, per quantity (the training losses; the probe windows' NLLs): twice the largest relative
  difference ``|here - reference| / |reference|`` over the measuring heals' steps or windows (twice a maximum,
  as the forward bands: few draws). Stored in ``reference/healing/bands.json`` by the pair of numeric classes
  (:func:`depthprune.verify.bands.numeric_class`), with the sets, both sides' kernel records and the commit.
* **The check** on other kernels: every training loss and probe NLL of CI's heal within its band of the
  reference; a pair with no measured band is not checked (the test skips and says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from depthprune.common import layout
from depthprune.common.jsonio import read_json

#: how many measuring heals a band is measured on
MEASURING = 6
#: the quantities a healing band bounds, each a list per heal
QUANTITIES = ("losses", "probe_nll")
BANDS_NAME = "bands.json"
#: where healing's references and bands live
FOLDER = Path(layout.REFERENCE) / "healing"


def measuring_sets(results: Iterable[Any], model: str, leave_out: Sequence[int]) -> list[tuple[int, ...]]:
    """The rule's measuring sets among ``results`` (the tiny grid's): ``model``'s distinct removed sets but
    ``leave_out``, by size then blocks, the first :data:`MEASURING`."""
    found = {tuple(sorted(r["removed"])) for r in results
             if r.identity.grid == "tiny" and r.identity.model == model and r["removed"]}
    found.discard(tuple(sorted(leave_out)))
    return sorted(found, key=lambda s: (len(s), s))[:MEASURING]


def relative_differences(here: Sequence[float], reference: Sequence[float]) -> list[float]:
    """``|here - reference| / |reference|`` entry by entry (infinite where the lengths differ)."""
    if len(here) != len(reference):
        return [float("inf")]
    return [abs(a - b) / abs(b) if b else (0.0 if a == b else float("inf")) for a, b in zip(here, reference)]


def measure(reference_heals: Mapping[str, Any], here_heals: Mapping[str, Any]) -> dict[str, Any]:
    """The band of two runs of the measuring heals (``--heals`` files), one per kernel class."""
    from depthprune.verify.bands import numeric_class

    sets = sorted(set(reference_heals["records"]) & set(here_heals["records"]))
    if not sets:
        raise ValueError("the two runs share no measuring heal")
    worst = {q: max(d for s in sets for d in relative_differences(here_heals["records"][s][q],
                                                                   reference_heals["records"][s][q]))
             for q in QUANTITIES}
    a, b = numeric_class(reference_heals["environment"]), numeric_class(here_heals["environment"])
    return {"pair": pair_of(reference_heals["environment"], here_heals["environment"]), "classes": [a, b],
            "sets": sets, "largest": worst,
            "band": {q: 2 * v for q, v in worst.items()},
            "environments": [reference_heals["environment"], here_heals["environment"]],
            "rule": "twice the largest relative difference over the measuring heals (depthprune.healing.band)"}


def pair_of(reference_env: Mapping[str, Any], here_env: Mapping[str, Any]) -> str:
    """The pair of numeric classes (:func:`depthprune.verify.bands.numeric_class`) two environment records ran on:
    the key a healing band is stored and found by."""
    from depthprune.verify.bands import numeric_class, pair_key

    return pair_key(numeric_class(reference_env), numeric_class(here_env))


def band_for(bands: Mapping[str, Any], reference_env: Mapping[str, Any],
             here_env: Mapping[str, Any]) -> dict[str, Any] | None:
    """The measured band of the two records' pair of classes, or None."""
    return bands.get(pair_of(reference_env, here_env))


def within(record: Mapping[str, Any], reference: Mapping[str, Any], band: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether every training loss and probe NLL of ``record`` lies within ``band`` of the reference's, and why."""
    for q in QUANTITIES:
        diffs = relative_differences(record[q], reference[q])
        largest = max(diffs)
        if largest > band["band"][q]:
            at = [i for i, d in enumerate(diffs) if d > band["band"][q]]
            return False, (f"{q} at {at[:5]} moved {largest:.3g} of the reference's, past the healing band "
                           f"{band['band'][q]:.3g} of {band['pair']}")
    return True, (f"every training loss and probe NLL within the healing band of {band['pair']} "
                  f"(losses {band['band']['losses']:.3g}, probe NLLs {band['band']['probe_nll']:.3g} of the reference's)")


def bands_path(root: str | Path = ".") -> Path:
    return Path(root) / FOLDER / BANDS_NAME


def read_bands(root: str | Path = ".") -> dict[str, Any]:
    path = bands_path(root)
    return dict(read_json(path)) if path.is_file() else {}
