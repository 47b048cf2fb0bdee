"""CI's heal: one tiny set healed and checked against the stored reference: exactly on the reference's kernels,
within the healing band measured for the two kernel classes elsewhere (depthprune.healing.band), skipped with the
reason where no band is measured; and the comparison can fail."""

from __future__ import annotations

import pytest

from depthprune.healing import band, reference


@pytest.fixture(scope="module")
def healed() -> tuple[dict, int, int]:
    """The CI heal's record, and this process's torch thread count before and after it."""
    import torch

    before = torch.get_num_threads()
    record = reference.heal_record()
    return record, before, torch.get_num_threads()


@pytest.fixture(scope="module")
def record(healed) -> dict:
    return healed[0]


def test_the_ci_heal_is_the_stored_reference(record):
    stored = reference.read_reference()
    if stored is None:
        pytest.fail(f"no stored reference {reference.reference_path()}: write it with `depthprune measure "
                    "healing-reference`")
    outcome, why = reference.compare(record, stored, band.read_bands())
    if outcome == "skip":
        pytest.skip(why)
    assert outcome in ("exact", "within"), why


def test_the_comparison_tells_a_different_heal(record):
    assert reference.compare(record, record)[0] == "exact"
    moved = {**record, "probe_nll": [record["probe_nll"][0] + 1e-7, *record["probe_nll"][1:]]}
    assert reference.compare(record, moved) == ("differs", "probe_nll differs from the reference at [0] on the "
                                                           "reference's kernels")
    other = {**record, "environment": {**record["environment"], "kernels": {}}}
    assert reference.compare(record, other)[0] == "skip"


def _on_other_kernels(record: dict, nudge: float) -> dict:
    """``record`` as if healed on another kernel class (AVX2), its first probe NLL moved by ``nudge`` of itself."""
    kernels = {**record["environment"]["kernels"], "capability": "AVX2", "fp32_matmul_isa": "avx2",
               "fingerprint": {**record["environment"]["kernels"]["fingerprint"], "float32": "other"}}
    nll = record["probe_nll"]
    return {**record, "environment": {**record["environment"], "kernels": kernels},
            "probe_nll": [nll[0] * (1 + nudge), *nll[1:]]}


def test_on_other_kernels_the_healing_band_decides_and_without_one_the_check_skips(record):
    here = _on_other_kernels(record, 1e-4)
    measured = band.measure({"records": {"s": record}, "environment": record["environment"]},
                            {"records": {"s": {**record, "probe_nll": [record["probe_nll"][0] * (1 + 2e-4),
                                                                       *record["probe_nll"][1:]]}},
                             "environment": here["environment"]})
    bands = {measured["pair"]: measured}  # probe NLLs: twice 2e-4 of the reference's; losses: equal, band 0
    assert reference.compare(here, record, bands)[0] == "within"
    outcome, why = reference.compare(_on_other_kernels(record, 1e-3), record, bands)
    assert outcome == "differs" and why.startswith("probe_nll at [0] moved")
    outcome, why = reference.compare(here, record, {})
    assert outcome == "skip" and "no band has been measured for healing on" in why


def test_the_ci_heal_runs_at_its_own_thread_count_and_gives_the_process_its_own_back(healed):
    record, before, after = healed
    assert record["environment"]["kernels"]["fingerprint"]["threads"] == reference.THREADS
    assert after == before
