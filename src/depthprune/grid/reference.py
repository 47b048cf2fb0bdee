"""Reference results per cell, with tolerances, and the comparison that grid cells assert.

Two kinds of reference, both written by code (never by hand), both recording provenance:

* ``measured`` — written from a run with ``--update-reference``: the removed set, the
  calibration loss and every metric, plus the tolerances of the grid's case file.
  A result passes if its calibration loss is within tolerance and either its removed
  set is the same (then every metric is compared) or it is a *near tie*: a different
  set whose calibration loss is within ``near_tie_rel`` (then metrics are not compared,
  since they belong to a different model, and the note says so).
* ``public-source`` — what public material states about a paper cell, e.g. the paper's
  text naming LLaMA3's perplexity-pruned cluster. It is loose by nature and says how
  loose (a minimum Jaccard overlap), and where it comes from.

A measured reference belongs to the numeric precision it was made in: it lives in
``reference/<dtype>/<cell>.json`` (``bfloat16``, ``float32``) and records that dtype. A run
reads only the reference of its own dtype, and :func:`compare` refuses any other, so a cell
is never compared silently against a reference made in another precision (``dtype = "auto"``
picks bf16 or fp32 by the machine: :mod:`depthprune.model.precision`). Public-source references
hold for every precision and live in ``reference/<cell>.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json, write_json_atomic
from depthprune.grid.cases import Tolerance
from depthprune.model.kernel_identity import same_kernels
from depthprune.model.precision import dtype_name
from depthprune.results.provenance import environment, git_revision
from depthprune.results.schema import Result

ACCURACY_SUFFIXES = ("_acc", "_acc_norm")


def reference_path(ref_dir: str | Path, cell_id: str, dtype: str | None = None) -> Path:
    """A measured reference's file (its dtype's folder); ``dtype=None``: a public-source one."""
    folder = Path(ref_dir) / dtype_name(dtype) if dtype else Path(ref_dir)
    return folder / f"{cell_id}.json"


def reference_dtypes(ref_dir: str | Path, cell_id: str) -> list[str]:
    """The dtypes in which measured references of ``cell_id`` exist."""
    root = Path(ref_dir)
    if not root.is_dir():
        return []
    return sorted(d.name for d in root.iterdir() if d.is_dir() and (d / f"{cell_id}.json").is_file())


def _result_dtype(result: Mapping[str, Any]) -> str | None:
    dtype = (result.get("environment") or {}).get("dtype")
    return dtype_name(dtype) if dtype else None


def _comparable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if not k.endswith("_stderr")}


def _made_on_stand_in(result: Result) -> bool:
    return bool(result.identity.stand_in)


def make_reference(result: Result, tolerance: Tolerance, command: str) -> dict[str, Any]:
    if _made_on_stand_in(result):
        raise ValueError(f"{result.get('cell')}: made on a rehearsal stand-in; a stand-in result is never a reference")
    dtype = _result_dtype(result)
    if dtype is None:
        raise ValueError(f"{result.get('cell')}: the result records no dtype; a measured reference needs one")
    return {
        "cell": result["cell"],
        "kind": "measured",
        "dtype": dtype,
        "removed": result["removed"],
        "calibration_loss": result["calibration_loss"],
        "metrics": _comparable(result["metrics"]),
        "tolerance": asdict(tolerance),
        "provenance": {
            "written_by": command,
            "from_result_fingerprint": result["fingerprint"],
            "git_revision": git_revision(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "environment": result.get("environment", environment()),
        },
    }


def write_reference(ref_dir: str | Path, reference: dict[str, Any]) -> Path:
    path = reference_path(ref_dir, reference["cell"], reference.get("dtype"))
    write_json_atomic(path, reference)
    return path


def read_reference(ref_dir: str | Path, cell_id: str, dtype: object = None) -> dict[str, Any] | None:
    """The cell's reference for a run in ``dtype``: the measured one of that dtype, else a
    public-source one; None if neither exists (:func:`reference_dtypes` says which others do)."""
    for path in ([reference_path(ref_dir, cell_id, dtype_name(dtype))] if dtype else []) + [reference_path(ref_dir, cell_id)]:
        if path.is_file():
            reference = read_json(path)
            made_in = reference.get("dtype")
            if reference.get("kind") == "measured" and made_in != (dtype_name(dtype) if dtype else None):
                raise ValueError(f"{path}: a measured reference made in {made_in} is filed as "
                                 f"{path.parent.name!r}; measured references live in <reference-dir>/<dtype>/")
            return reference
    return None


def _numerics(environment: dict[str, Any] | None) -> tuple[Any, Any]:
    """(bf16 matmul kernel, torch threads) a result ran with (depthprune.model.precision; None where not
    recorded): either changes a bf16 run's accumulation order."""
    env = environment or {}
    return (env.get("kernels") or {}).get("bf16_matmul_kernel"), env.get("torch_threads")


def other_kernels(ran: dict[str, Any] | None, made: dict[str, Any] | None) -> str | None:
    """Why a run (``ran``, its environment record) and a reference's (``made``) ran other kernels or threads, or
    None where they ran the same or it cannot be told. Their fingerprints decide where both have one
    (:func:`depthprune.model.kernel_identity.same_kernels`: the bits, whatever the banners say); older records fall
    back to the bf16 matmul kernel and the thread count, where both are recorded."""
    ran, made = ran or {}, made or {}
    same = same_kernels(ran, made)
    if same is not None:
        if same:
            return None
        fp = [(e.get("kernels") or {}).get("fingerprint") or {} for e in (ran, made)]
        key = "float32" if dtype_name(ran.get("dtype")) == "float32" else "bfloat16"
        return (f"kernel fingerprints differ ({key} {fp[0].get(key)} at {fp[0].get('threads')} threads here, "
                f"{fp[1].get(key)} at {fp[1].get('threads')} for the reference)")
    a, b = _numerics(ran), _numerics(made)
    if None in a + b or a == b:
        return None
    return f"other matmul kernels or thread counts than the reference ({a[0]}, {a[1]} threads vs {b[0]}, {b[1]})"


def not_checkable(result: Result, reference: dict[str, Any]) -> str | None:
    """Why a removed set other than a measured reference's cannot be told from a numeric fork, or None.

    A searcher steered by what follows the machine's kernels besides the losses (``Searcher.kernel_sensitive``:
    bo's GP fits) asks for other sets on other kernels from the same losses. Its set is then checked exactly only
    where the reference recorded the same kernels and threads as this run; a reference made on others (or before
    references recorded kernels) has no trace to find where the runs part (:mod:`depthprune.verify.forks` needs its
    archived run), so the cell is not checkable here, rather than failed or passed.
    """
    from depthprune.search import SEARCHERS

    if reference.get("kind") != "measured" or sorted(result["removed"]) == sorted(reference["removed"]):
        return None
    search = result.identity.search
    steer = SEARCHERS[search].kernel_sensitive if search in SEARCHERS else ""
    ran = result.get("environment") or {}
    made = (reference.get("provenance") or {}).get("environment") or {}
    made_kernels = made.get("kernels")
    if not steer:
        return None
    same = same_kernels(ran, made)  # the fingerprints, where both have one; else the whole record and threads
    if same is False:
        made_on = f"on other kernels than this run: {other_kernels(ran, made)}"
    elif same is None and made_kernels is not None and (ran.get("kernels"), ran.get("torch_threads")) != (
            made_kernels, made.get("torch_threads")):
        made_on = (f"on kernels {made_kernels} ({made.get('torch_threads')} torch threads), this run on "
                   f"{ran.get('kernels')} ({ran.get('torch_threads')})")
    elif same is None and made_kernels is None:
        made_on = "with no kernel record"
    else:
        return None
    return (f"removed {sorted(result['removed'])} vs reference {sorted(reference['removed'])}: {search} is steered by "
            f"{steer}, and its {reference.get('dtype')} reference was made {made_on}: another set cannot be told from "
            "a numeric fork here; it is checked exactly where the reference's kernels and threads run")


def jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    """The size of the intersection over that of the union of two removed sets (1.0 for two empty ones)."""
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def _metric_tolerance(name: str, tol: dict[str, float]) -> tuple[str, float]:
    if name.endswith(ACCURACY_SUFFIXES) or name == "avg_acc":
        return "abs", tol["accuracy_abs"]
    return "rel", tol["perplexity_rel"]


def compare(result: Result, reference: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(problems, notes): the cell passes when ``problems`` is empty."""
    problems: list[str] = []
    notes: list[str] = []
    if _made_on_stand_in(result):
        return [f"made on a rehearsal stand-in ({result.identity.weights}): "
                "never compared with a reference (bench/test_rehearsal.py checks invariants)"], notes
    got = sorted(result["removed"])
    if reference.get("kind") == "public-source":
        overlap = reference["removed_overlap"]
        j = jaccard(got, overlap["layers"])
        line = (f"removed {got} vs {reference['source']['what']} {overlap['layers']}: "
                f"Jaccard {j:.2f} (needs >= {overlap['min_jaccard']})")
        (problems if j < overlap["min_jaccard"] else notes).append(line)
        return problems, notes

    made_in, ran_in = reference.get("dtype"), _result_dtype(result)
    if made_in != ran_in:
        return [f"the reference was made in {made_in}, this result in {ran_in}: results of different "
                "precisions are never compared (reference/<dtype>/ holds one reference per dtype)"], notes
    tol = {**asdict(Tolerance()), **reference.get("tolerance", {})}
    other = other_kernels(result.get("environment"), (reference.get("provenance") or {}).get("environment"))
    if other and ran_in == "bfloat16":
        tol["calibration_loss_rel"] = max(tol["calibration_loss_rel"], tol["other_kernels_loss_rel"])
        notes.append(f"bf16 on {other}: calibration-loss tolerance rel {tol['calibration_loss_rel']:g}")
    elif other:
        notes.append(f"{ran_in} on {other}: the grid's own tolerances (float32's rounding moves losses far less)")
    want = sorted(reference["removed"])
    ref_loss, loss = reference["calibration_loss"], result["calibration_loss"]
    loss_ok = abs(loss - ref_loss) <= max(tol["calibration_loss_abs"], tol["calibration_loss_rel"] * abs(ref_loss))
    same_set = got == want
    if same_set and not loss_ok:
        problems.append(f"calibration loss {loss:.6g} vs reference {ref_loss:.6g} "
                        f"(Δ {loss - ref_loss:+.3g}; tolerance rel {tol['calibration_loss_rel']:g})")
    if not same_set:
        near = abs(loss - ref_loss) <= tol["near_tie_rel"] * max(abs(ref_loss), 1e-12)
        line = (f"removed layers {got} vs reference {want} "
                f"(calibration loss {loss:.6g} vs {ref_loss:.6g}, Δ {loss - ref_loss:+.3g}; "
                f"near-tie tolerance rel {tol['near_tie_rel']:g})")
        if near:
            notes.append("accepted as a near tie: " + line + "; metrics not compared (different model)")
        else:
            problems.append(line)
        return problems, notes
    metrics = result["metrics"]
    for name, ref_value in sorted(_comparable(reference["metrics"]).items()):
        if name not in metrics:
            problems.append(f"{name}: missing (reference {ref_value:.6g})")
            continue
        kind, t = _metric_tolerance(name, tol)
        delta = metrics[name] - ref_value
        bound = t if kind == "abs" else t * abs(ref_value)
        if abs(delta) > bound:
            problems.append(f"{name}: {metrics[name]:.6g} vs reference {ref_value:.6g} "
                            f"(Δ {delta:+.4g}, tolerance {kind} {t:g})")
    return problems, notes


def format_failure(cell_id: str, problems: list[str], notes: list[str]) -> str:
    lines = [f"{cell_id} does not match its reference:"] + [f"  - {p}" for p in problems]
    lines += [f"  note: {n}" for n in notes]
    lines.append("  (if the change is intended: rerun with --update-reference and commit reference/)")
    return "\n".join(lines)


# -- public-source references for paper cells ------------------------------------------------

#: What public sources say about paper cells, quoted so that the claim can be checked.
PUBLIC_SOURCES: list[dict[str, Any]] = [
    {
        "cells": [f"llama3-8b-ppl-{s}-M9" for s in ("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")],
        "source": {
            "citation": "v1 summary (000_cf220a582586f00c.txt): a third party's summary of the paper's first "
                        "version (arXiv 2604.24938v1), second-hand — not in the paper's own text (v2)",
            "quote": "Removals concentrated in contiguous mid-to-late layer clusters "
                     "(e.g., layers 9–12 and 22–26 in LLaMA3).",
            "what": "the v1 summary's perplexity-pruned LLaMA3 cluster",
            "second_hand": True,
            "caveat": "second-hand: the paper's v2 text says only that perplexity pruning concentrates on "
                      "contiguous mid-to-late layers (Sec. 5.1) and names no layers; the summary names a cluster, "
                      "not per-searcher masks; 9 layers match M=9. Layer numbering assumed 0-based as in "
                      "transformers.",
        },
        "removed_overlap": {"layers": [9, 10, 11, 12, 22, 23, 24, 25, 26], "min_jaccard": 0.5},
    },
]


def write_public_references(ref_dir: str | Path) -> list[Path]:
    """(Re)write every public-source reference; returns the paths written."""
    written = []
    for entry in PUBLIC_SOURCES:
        for cell in entry["cells"]:
            ref = {
                "cell": cell,
                "kind": "public-source",
                "source": entry["source"],
                "removed_overlap": entry["removed_overlap"],
                "provenance": {"written_by": "depthprune.grid.reference.write_public_references "
                                             "(from PUBLIC_SOURCES in that module)"},
            }
            written.append(write_reference(ref_dir, ref))
    return written
