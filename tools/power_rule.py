"""The evaluation's power rule, measured: how many items a 3-point paired difference needs.

    python tools/power_rule.py A.json B.json [C.json D.json ...] [--target 3] [--items 3600]

Each pair of ``depthprune evaluate --json`` files is two pruned solutions of one condition,
evaluated on the same items. For each pair it prints the discordance (share of items the two
solutions answer differently), the paired standard error of their avg-accuracy difference with
items independent and clustered by source (``item_clusters``), the design effect, the items a
``--target``-point difference needs at 80% power and a two-sided 95% test (Miller 2024, "Adding
Error Bars to Evals": n = (z_0.975 + z_0.8)² × var(per-item difference) / target², times the
design effect), and the minimum detectable effect at ``--items`` items.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from depthprune.report import noise


def _blocks(a: dict, b: dict, clustered: bool) -> list[noise.Outcomes]:
    heads = a["protocol"]["zero_shot"]["headline_metric"]
    out = []
    for task, metric in heads.items():
        xa, xb = a["item_outcomes"][task][metric], b["item_outcomes"][task][metric]
        values = np.stack([noise.outcome_bits(xa), noise.outcome_bits(xb)], axis=1)
        clusters = (a.get("item_clusters") or {}).get(task) if clustered else None
        out.append(noise.Outcomes.from_units(values, clusters))
    return out


def measure(a: dict, b: dict, target: float, items: int, confidence: float = 0.95, power: float = 0.80) -> dict:
    iid, clustered = _blocks(a, b, False), _blocks(a, b, True)
    z = noise.z_sum(confidence, power)
    n = sum(blk.n_units for blk in iid)
    disc = noise.discordance(iid, 0, 1)
    diffs = np.concatenate([blk.totals[:, 0] - blk.totals[:, 1] for blk in iid])
    se = {name: noise.paired_mde(blocks, 0, 1, confidence, power) / z for name, blocks in (("iid", iid),
                                                                                         ("clustered", clustered))}
    deff = (se["clustered"] / se["iid"]) ** 2 if se["iid"] > 0 else math.nan
    need = z ** 2 * float(np.var(diffs)) / (target / 100) ** 2 * deff
    return {"model": a["model"], "a": a["removed"], "b": b["removed"], "items": n,
            "clusters": sum(blk.n_clusters for blk in clustered), "discordance": disc,
            "difference_pts": 100 * float(np.mean(diffs)), "se_iid_pts": 100 * se["iid"],
            "se_clustered_pts": 100 * se["clustered"], "design_effect": deff,
            "items_for_target": need, "mde_at_items_pts": 100 * z * se["clustered"] * math.sqrt(n / items)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="evaluate --json files, two per pair")
    parser.add_argument("--target", type=float, default=3.0, help="paired difference to detect, points")
    parser.add_argument("--items", type=int, default=3600, help="items the MDE is stated at")
    args = parser.parse_args(argv)
    if len(args.files) % 2:
        parser.error("give the files in pairs")
    for fa, fb in zip(args.files[::2], args.files[1::2]):
        row = measure(json.loads(fa.read_text()), json.loads(fb.read_text()), args.target, args.items)
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
