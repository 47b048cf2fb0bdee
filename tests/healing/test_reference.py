"""CI's heal: one tiny set healed and checked against the stored reference: exactly on the reference's kernels,
skipped with the reason elsewhere (no band is measured for healing); and the comparison can fail."""

from __future__ import annotations

import pytest

from depthprune.healing import reference


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
    outcome, why = reference.compare(record, stored)
    if outcome == "skip":
        pytest.skip(why)
    assert outcome == "exact", why


def test_the_comparison_tells_a_different_heal(record):
    assert reference.compare(record, record)[0] == "exact"
    moved = {**record, "probe_nll": [record["probe_nll"][0] + 1e-7, *record["probe_nll"][1:]]}
    assert reference.compare(record, moved) == ("differs", "probe_nll differs from the reference at [0] on the "
                                                           "reference's kernels")
    other = {**record, "environment": {**record["environment"], "kernels": {}}}
    assert reference.compare(record, other)[0] == "skip"


def test_the_ci_heal_runs_at_its_own_thread_count_and_gives_the_process_its_own_back(healed):
    record, before, after = healed
    assert record["environment"]["kernels"]["fingerprint"]["threads"] == reference.THREADS
    assert after == before
