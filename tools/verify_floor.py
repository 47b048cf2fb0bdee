"""How much compute verify's first opinion cannot avoid over an archive, and what it costs on this machine
(issue 35, item 6: the whole real archive in <= 45 min on 2 cores; docs/verify.md, "What the time is").

Per condition (model, objective and its parameters), counted with no model: the sets verify checks (its full
rule: every set the cells' runs recorded), the blocks their prefix-tree walk runs
(:meth:`depthprune.scoring.scorer.Scorer.prefetch`: each block of the tree once, from the dense states) and one
output head per set. Then, on this machine, the condition's scorer times a head alone (the set {L-1},
resumed from the dense state entering its block) and L-1 blocks plus a head (the set {0}), best of
``--rounds``; the walk's floor is ``blocks x block + sets x head``. A walk that runs each block of the tree
once and one head per set cannot compute less for these sets, so what the floor leaves of a run's time is
all that faster code could save; the rest asks for faster kernels or fewer checks.

    python tools/verify_floor.py [--results archive] [--grid real] [--model M] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict

import torch

from depthprune.recipe import Session
from depthprune.results.schema import calibration_of
from depthprune.verify.remeasure import calibration_requests
from depthprune.verify.run import select_cells
from depthprune.verify.second import check_scorer


def walk(sets: set[frozenset[int]], n_layers: int) -> int:
    """Blocks the prefix-tree walk of ``sets`` runs (:meth:`Scorer.prefetch`, from the dense states): the nodes
    of the tree, each block ``k`` after a set's first removed one under the removals before it (the count
    ``tests/scoring/test_scorer.py`` holds the walk to)."""
    return len({(k, frozenset(i for i in s if i < k)) for s in sets if s for k in range(min(s), n_layers) if k not in s})


def best_seconds(scorer, removed: frozenset[int], from_embeddings: bool, rounds: int) -> float:  # noqa: ANN001
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        scorer._run(removed, use_cache=not from_embeddings, capture=False)
        out.append(time.perf_counter() - start)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="archive")
    ap.add_argument("--grid", default="real")
    ap.add_argument("--model", action="append", help="only this model (repeatable)")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    by_condition = defaultdict(list)
    for r in select_cells([args.results], [args.grid]):
        if not args.model or r.identity.model in args.model:
            by_condition[calibration_of(r)].append(r)
    rows = []
    for model in sorted({k[0] for k in by_condition}):
        session = Session.open(model, device="cpu", dtype=args.dtype)
        n = session.n_layers
        try:
            for key in sorted(k for k in by_condition if k[0] == model):
                cells = by_condition[key]
                sets = set(calibration_requests(cells))
                scorer = check_scorer(session, key)  # with its dense pass
                head = best_seconds(scorer, frozenset({n - 1}), False, args.rounds)
                block = (best_seconds(scorer, frozenset({0}), True, args.rounds) - head) / (n - 1)
                blocks = walk(sets, n)
                row = {"model": model, "objective": key[1], "sets": len(sets), "blocks": blocks,
                       "blocks_from_embeddings": sum(n - len(s) for s in sets), "head_s": round(head, 3),
                       "block_s": round(block, 4), "floor_s": round(blocks * block + len(sets) * head, 1),
                       "dtype": session.dtype, "threads": torch.get_num_threads()}
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            session.close()
    total = sum(r["floor_s"] for r in rows)
    print(f"floor over {len(rows)} conditions: {total:.0f} s ({total / 60:.1f} min) of set scoring")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
