"""CI's check of the real models on every CPU: a seeded sample of the real archive re-measured here.

The real CI slice (``cases/real-ci.toml``) runs two cells end to end, but only where its references'
precision is native (bf16 on AMX); elsewhere it skips, and CI then checked no real-model number at all.
This check travels. One cell per model and objective of ``archive/real.jsonl.xz``, drawn with the seed
``SEED``, is re-measured in whatever precision this machine runs (``auto``) against its archived result
and the shipped bands (``verify/bands.json``): exactly ``depthprune verify --results archive --grid real
--sample ci --cell ...``. CI's sample rule (``remeasure.CI``, written down before its first run): the
removed set and the final decision's rival, and the windows that catch a change to 20% of a dataset's
windows with probability 95%; no item outcome (``remeasure.Sample`` says why: bf16 rounding flips near-tied
items even on the records' own kernels). A FAILED cell fails the test; a pair of precisions with no band at
all (NOT VERIFIED) skips with the reason. Weights missing: skips.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from depthprune.result import Result
from depthprune.verify.bands import load_table
from depthprune.verify.remeasure import CI, FAILED, NOT_VERIFIED, remeasure
from depthprune.verify.run import SelectionError, check_weights, remeasure_lines, select_cells

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"
SEED = "real-ci-verify:0"


def sampled_cells() -> list[Result]:
    """One cell per (model, objective) of the real archive, drawn in sorted order from one seeded generator."""
    cells = select_cells([ARCHIVE], ["real"])
    rng = random.Random(SEED)
    picks = []
    for key in sorted({(r.identity.model, r.identity.objective) for r in cells}):
        group = sorted((r for r in cells if (r.identity.model, r.identity.objective) == key), key=lambda r: r["cell"])
        picks.append(rng.choice(group))
    return picks


def test_the_sample_covers_both_models_and_both_objectives():
    picks = sampled_cells()
    assert sorted((r.identity.model, r.identity.objective) for r in picks) == [
        (m, o) for m in ("gemma3-270m", "smollm2-135m") for o in ("margin", "ppl")]
    assert all(r.get("evaluated") and r.get("item_outcomes") for r in picks)


@pytest.mark.parametrize("model", ["gemma3-270m", "smollm2-135m"])
def test_a_seeded_sample_of_the_real_archive_verifies_on_this_cpu(model):
    cells = [r for r in sampled_cells() if r.identity.model == model]
    try:
        check_weights(cells)
    except SelectionError as err:
        pytest.skip(str(err))
    checks, _ = remeasure(cells, load_table(), seed=0, progress=False, sample=CI)
    report = "\n".join([f"{c.cell}: {c.label} on {c.here_class} against {c.recorded_class}" for c in checks]
                       + remeasure_lines(checks))
    print(report)
    assert [c.cell for c in checks] == sorted(r["cell"] for r in cells)
    assert not [c for c in checks if c.status == FAILED], report
    if any(c.status == NOT_VERIFIED for c in checks):
        pytest.skip(f"not measured here: {report}")
    for c in checks:  # each cell re-scored its answer and re-evaluated its sampled windows
        assert c.sets_checked >= 1 and c.evaluation is not None and c.evaluation.windows > 0, report
