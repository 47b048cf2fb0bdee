"""The healing band's measuring heals and its measurement (:mod:`depthprune.healing.band` holds the rule).

    depthprune measure healing-band --heals avx512.json          # the measuring heals, on this machine's kernels
    depthprune measure healing-band --reference avx512.json --here avx2.json   # their band -> reference/healing/

Each run of ``--heals`` heals the rule's measuring sets exactly as CI's set is healed
(:func:`depthprune.healing.reference.heal_record`), on whatever kernels this process runs: run it once per kernel
class (a cap such as ``ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2`` emulates
another class on one machine), then measure the pair.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import JSONFileError, read_json, write_json_atomic
from depthprune.healing.band import QUANTITIES, bands_path, measure, measuring_sets, read_bands


def heal_measuring_sets(sets: Sequence[tuple[int, ...]], progress: bool = True) -> dict[str, Any]:
    """Each measuring set healed as CI's set is, on this machine's kernels."""
    from tqdm import tqdm

    from depthprune.healing.reference import heal_record

    records, environment = {}, None
    for removed in tqdm(sets, desc="measuring heals", disable=not progress):
        record = heal_record(removed)
        environment = record["environment"]
        records["_".join(map(str, removed))] = {q: record[q] for q in QUANTITIES}
    return {"sets": [list(s) for s in sets], "records": records, "environment": environment}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--heals", metavar="OUT", help="heal the measuring sets on this machine's kernels into OUT (JSON)")
    p.add_argument("--reference", metavar="FILE", help="the measuring heals on the reference's kernel class")
    p.add_argument("--here", metavar="FILE", help="the measuring heals on the other kernel class")
    p.add_argument("--archive", default="archive", help="the tiny grid's results (default: archive)")
    p.add_argument("--root", default=".", help="the checkout whose reference/healing/bands.json is written")


def _read_heals(option: str, path: str) -> dict[str, Any]:
    from depthprune.common.errors import InputError

    file = Path(path)
    if not file.is_file():
        raise InputError(f"{option} {path}: no such file (write it with --heals)")
    try:
        heals = dict(read_json(file))
    except JSONFileError as err:
        raise InputError(f"{option} {path}: not JSON ({err.problem})") from None
    missing = [k for k in ("records", "environment") if k not in heals]
    if missing:
        raise InputError(f"{option} {path}: no field {', '.join(missing)}: not a --heals file")
    return heals


def run(args: argparse.Namespace) -> int:
    from depthprune.common.errors import InputError
    from depthprune.healing.reference import MODEL, REMOVED
    from depthprune.results.provenance import git_revision
    from depthprune.results.store import iter_results

    if bool(args.heals) == bool(args.reference or args.here):
        raise InputError("give --heals OUT, or --reference FILE with --here FILE")
    if args.heals:
        if Path(args.heals).exists():
            raise InputError(f"--heals {args.heals}: exists; measuring heals are not overwritten")
        sets = measuring_sets(iter_results([Path(args.archive)]), MODEL, REMOVED)
        if not sets:
            raise InputError(f"--archive {args.archive}: no tiny-grid result of {MODEL} to measure on")
        write_json_atomic(Path(args.heals), heal_measuring_sets(sets))
        print(f"wrote {args.heals}: {len(sets)} measuring heals")
        return 0
    if not (args.reference and args.here):
        raise InputError("--reference and --here go together")
    reference_heals, here_heals = _read_heals("--reference", args.reference), _read_heals("--here", args.here)
    try:
        band = measure(reference_heals, here_heals)
    except ValueError as err:
        raise InputError(f"--reference {args.reference} --here {args.here}: {err}") from None
    band["commit"] = git_revision()
    bands = read_bands(args.root)
    bands[band["pair"]] = band
    write_json_atomic(bands_path(args.root), bands)
    print(f"{band['pair']}: largest relative differences {band['largest']}; band {band['band']} -> "
          f"{bands_path(args.root)}")
    return 0
