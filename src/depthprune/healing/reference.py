"""CI's heal: one tiny set healed at a small budget, checked against a stored reference the same code made.

    depthprune measure healing-reference            # writes reference/healing/<model>-<set>.json

The heal is deterministic on one machine at one thread count (it runs at :data:`THREADS`, whatever the process's),
so where this machine's float32 kernels are the reference's (the kernel fingerprints of
:mod:`depthprune.model.kernel_identity` match, thread count included) the check is exact: every step's training loss, and
the healed model's mean NLL on each of a few validation windows, bit for bit. Where they differ, the forward bands
of :mod:`depthprune.verify.bands` do not apply (they are for a forward, not for a training run whose rounding
compounds over its steps): the heal is checked against a band measured for healing on the two kernel classes
(:mod:`depthprune.healing.band`), and where none is measured the check skips and says so instead of borrowing one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json, write_json_atomic
from depthprune.healing import band
from depthprune.healing.config import HealConfig

#: the set: tiny-llama3's one-shot ppl set of the tiny grid at M = 3 (archive/tiny), a budget of four steps
MODEL = "tiny-llama3"
REMOVED = (2, 6, 9)
CONFIG = HealConfig(tokens=4096, seq_len=256, batch_size=4, seed=0)
PROBE_WINDOWS = 8  # validation windows of 256 tokens whose NLL the healed model is checked on
#: the heal's torch thread count, whatever the process's: the kernel fingerprint holds the count (a 2-thread
#: reference never matched CI's 1-thread xdist workers, so CI healed and then skipped, 2026-12-07)
THREADS = 1
FOLDER = band.FOLDER


def reference_path(root: str | Path = ".") -> Path:
    return Path(root) / FOLDER / f"{MODEL}-{'_'.join(map(str, REMOVED))}-{CONFIG.tag}.json"


def heal_record(removed: Sequence[int] = REMOVED) -> dict[str, Any]:
    """Heal the CI set (or another set of its model, as the healing band's measuring heals) and measure it: what
    the reference holds and the check compares."""
    import torch

    from depthprune.data.healing_text import healing_fingerprint, healing_texts
    from depthprune.data.sources import eval_windows, load_texts
    from depthprune.healing.pruned import heal_removed
    from depthprune.recipe import Session
    from depthprune.results.provenance import environment

    threads = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    try:
        session = Session.open(MODEL, device="cpu", dtype="float32")
        texts = healing_texts(session.profile.name)
        model, report = heal_removed(session, tuple(removed), CONFIG, texts, healing_fingerprint(session.profile.name))
        windows = eval_windows(load_texts(session.profile.source("c4_validation")), session.tokenizer, CONFIG.seq_len,
                               " ", max_windows=PROBE_WINDOWS)[0]
        with torch.no_grad():
            logits = model(input_ids=windows).logits[:, :-1].float()
            nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none").mean(1)
        return {"model": MODEL, "removed": list(removed), "config": CONFIG.to_dict(), "losses": report.losses,
                "probe_nll": [float(x) for x in nll], "environment": environment("cpu", "torch.float32")}
    finally:
        torch.set_num_threads(threads)


def compare(record: dict[str, Any], reference: dict[str, Any],
            bands: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """("exact" | "within" | "differs" | "skip", why): exact where the kernels are the reference's and every number
    equal; on other kernels, within the healing band measured for the two classes (``bands``: as
    :func:`depthprune.healing.band.read_bands` reads them), or skip where none is."""
    from depthprune.model.kernel_identity import same_kernels

    same = same_kernels(record["environment"], reference["environment"])
    if same is None:
        return "skip", "the reference or this run records no kernel fingerprint: no rule decides"
    if not same:
        measured = band.band_for(bands or {}, reference["environment"], record["environment"])
        if measured is None:
            pair = band.pair_of(reference["environment"], record["environment"])
            return "skip", ("this machine's float32 kernels are not the reference's (kernel fingerprints differ) and no "
                            f"band has been measured for healing on {pair} (depthprune measure healing-band)")
        ok, why = band.within(record, reference, measured)
        return ("within" if ok else "differs"), why
    for key in band.QUANTITIES:
        if record[key] != reference[key]:
            diff = [i for i, (a, b) in enumerate(zip(record[key], reference[key])) if a != b]
            return "differs", f"{key} differs from the reference at {diff[:5]} on the reference's kernels"
    return "exact", "every training loss and probe NLL equals the reference's, on its kernels"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=".", help="the checkout whose reference/healing/ is written")


def run(args: argparse.Namespace) -> int:
    path = reference_path(args.root)
    write_json_atomic(path, heal_record())
    print(f"wrote {path}")
    return 0


def read_reference(root: str | Path = ".") -> dict[str, Any] | None:
    path = reference_path(root)
    return dict(read_json(path)) if path.is_file() else None
