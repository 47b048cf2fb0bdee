"""REPORT's calibration-size curve: the summaries ``depthprune measure calibration-curve``
writes (``calibration-curve-<model>.json``, found anywhere under the results directories), as one
table per model with the size its rule chose.

A result the paper does not have: how far the removed set moves when only the calibration
sample changes (three disjoint samples per size), and whether a small sample finds worse sets
(their loss on another seed's largest sample), not only other ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.common.text_tables import markdown_table

PREFIX = "calibration-curve-"


def find_curves(dirs: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every curve summary under ``dirs``, one per model (the last path found wins), sorted by model."""
    found: dict[str, dict[str, Any]] = {}
    for d in dirs:
        for path in sorted(Path(d).rglob(f"{PREFIX}*.json")):
            curve = read_json(path)
            found[curve["config"]["model"]] = curve
    return [found[m] for m in sorted(found)]


def render_curves(curves: list[dict[str, Any]]) -> list[str]:
    if not curves:
        return []
    lines = [
        "How far the removed set moves when only the calibration sample changes. Per size, three calibration "
        "seeds draw from disjoint thirds of the pool (every third document or record); *J across seeds* is "
        "their mean pairwise Jaccard, *J to own largest* each seed's Jaccard to its own set at the largest "
        "size. Losses are over the dense model's (nats; margin: −mean margin), on the sample itself and held "
        "out: each set scored on the next seed's largest sample. A falling held-out loss says small samples "
        "find worse sets, not only other ones.", ""]
    for curve in curves:
        cfg = curve["config"]
        sizes = "; ".join(f"{o} {', '.join(map(str, v))}" for o, v in cfg["sizes"].items())
        lines += [f"### {cfg['model']}, M = {cfg['budget']} (sizes: {sizes})", ""]
        rows = [[r["objective"], r["searcher"], r["size"], f"{r['cross_seed_jaccard']:.2f}",
                 f"{r['jaccard_to_largest']:.2f}", f"{r['loss_delta']:+.3f}", f"{r['held_out_loss_delta']:+.3f}",
                 f"{r['seconds']:.0f}"] for r in curve["rows"]]
        lines.append(markdown_table(rows, ["objective", "searcher", "size", "J across seeds", "J to own largest",
                                             "loss − dense", "held-out loss − dense", "s / search"]))
        lines += ["", f"Rule (fixed before the curve ran): {curve['rule']['text']}", ""]
        for objective, c in curve["chosen"].items():
            note = "" if c["settled_before_largest"] else " — the largest size: the curve has not shown the sets settling"
            lines.append(f"- **{objective}: {c['size']}**{note}")
        prov = curve.get("provenance", {})
        lines += ["", f"{prov.get('runs', '?')} searches; code {', '.join(prov.get('code', []))}; "
                      f"dtype {prov.get('environment', {}).get('dtype', '?')}. Written by `{curve['written_by']}`.", ""]
    return lines
