"""Reference comparison: exact sets, near ties, tolerances, public-source overlaps."""

from __future__ import annotations

import dataclasses
import json

import pytest

from depthprune.grid.cases import Tolerance
from depthprune.grid.reference import (
    compare,
    format_failure,
    make_reference,
    not_checkable,
    read_reference,
    reference_dtypes,
    write_public_references,
    write_reference,
)
from depthprune.results.schema import Result
from tests.fixtures import stored_identity


def _result(removed, loss, **metrics) -> Result:
    return Result({"cell": "m-ppl-greedy-M2", "identity": stored_identity(), "removed": removed,
                   "calibration_loss": loss, "fingerprint": "f",
                   "metrics": {"wikitext2_ppl": 20.0, "hellaswag_acc_norm": 0.5, "avg_acc": 0.55,
                               "hellaswag_acc_stderr": 0.03, **metrics}, "environment": {"dtype": "torch.bfloat16"}})


def test_identical_result_passes_and_reference_roundtrips(tmp_path):
    ref = make_reference(_result([3, 7], 2.0), Tolerance(), "test")
    assert "hellaswag_acc_stderr" not in ref["metrics"] and ref["provenance"]["written_by"] == "test"
    assert write_reference(tmp_path, ref) == tmp_path / "bfloat16" / "m-ppl-greedy-M2.json"
    assert read_reference(tmp_path, "m-ppl-greedy-M2", "torch.bfloat16") == json.loads(json.dumps(ref))
    assert compare(_result([3, 7], 2.0), ref) == ([], [])
    assert read_reference(tmp_path, "absent", "bfloat16") is None


def test_a_reference_serves_only_its_own_dtype(tmp_path):
    write_reference(tmp_path, make_reference(_result([3, 7], 2.0), Tolerance(), "t"))
    assert read_reference(tmp_path, "m-ppl-greedy-M2", "float32") is None
    assert reference_dtypes(tmp_path, "m-ppl-greedy-M2") == ["bfloat16"]
    fp32 = _result([3, 7], 2.0).replace(environment={"dtype": "torch.float32"})
    write_reference(tmp_path, make_reference(fp32, Tolerance(), "t"))
    assert reference_dtypes(tmp_path, "m-ppl-greedy-M2") == ["bfloat16", "float32"]
    assert read_reference(tmp_path, "m-ppl-greedy-M2", "float32")["dtype"] == "float32"
    # compare() itself refuses another precision, identical numbers or not
    problems, _ = compare(fp32, read_reference(tmp_path, "m-ppl-greedy-M2", "bfloat16"))
    assert problems and "made in bfloat16, this result in float32" in problems[0]


def test_a_misfiled_reference_is_an_error_not_a_comparison(tmp_path):
    ref = make_reference(_result([3, 7], 2.0), Tolerance(), "t")
    (tmp_path / "float32").mkdir()
    (tmp_path / "float32" / "m-ppl-greedy-M2.json").write_text(json.dumps(ref))
    with pytest.raises(ValueError, match="made in bfloat16 is filed as 'float32'"):
        read_reference(tmp_path, "m-ppl-greedy-M2", "float32")
    with pytest.raises(ValueError, match="records no dtype"):
        make_reference(_result([3, 7], 2.0).replace(environment={}), Tolerance(), "t")


def test_metric_out_of_tolerance_is_named_with_delta():
    ref = make_reference(_result([3, 7], 2.0), Tolerance(accuracy_abs=0.02, perplexity_rel=0.01), "t")
    problems, _ = compare(_result([3, 7], 2.0, hellaswag_acc_norm=0.45, wikitext2_ppl=20.1), ref)
    assert len(problems) == 1 and problems[0].startswith("hellaswag_acc_norm: 0.45 vs reference 0.5")
    assert "tolerance abs 0.02" in problems[0]
    text = format_failure("m-ppl-greedy-M2", problems, [])
    assert "--update-reference" in text


def test_near_tie_accepted_far_set_rejected():
    ref = make_reference(_result([3, 7], 2.0), Tolerance(near_tie_rel=1e-3), "t")
    problems, notes = compare(_result([3, 8], 2.0015, avg_acc=0.1), ref)
    assert problems == [] and "near tie" in notes[0] and "metrics not compared" in notes[0]
    problems, _ = compare(_result([3, 8], 2.1), ref)
    assert problems and "removed layers [3, 8] vs reference [3, 7]" in problems[0]


def test_same_set_different_loss_fails():
    ref = make_reference(_result([3, 7], 2.0), Tolerance(calibration_loss_rel=1e-4), "t")
    problems, _ = compare(_result([3, 7], 2.01), ref)
    assert problems and problems[0].startswith("calibration loss")


def test_public_source_references(tmp_path):
    paths = write_public_references(tmp_path)
    assert len(paths) == 7
    ref = read_reference(tmp_path, "llama3-8b-ppl-greedy-M9", "bfloat16")
    assert ref["kind"] == "public-source" and "2604.24938" in ref["source"]["citation"]
    good = _result([9, 10, 11, 12, 22, 23, 24, 25, 27], 1.0)
    bad = _result([0, 1, 2, 3, 4, 5, 6, 7, 8], 1.0)
    assert compare(good, ref)[0] == []
    assert compare(bad, ref)[0] and "Jaccard 0.00" in compare(bad, ref)[0][0]


def test_public_source_references_are_labelled_second_hand_and_quote_their_source():
    import pathlib

    from depthprune.grid.reference import PUBLIC_SOURCES

    summary = pathlib.Path(__file__).resolve().parents[3] / "shared" / "paper" / "000_cf220a582586f00c.txt"
    for entry in PUBLIC_SOURCES:
        src = entry["source"]
        assert src["second_hand"] and src["citation"].startswith("v1 summary (000_")
        assert "not in the paper's own text" in src["citation"]
        if summary.is_file():  # the developers' copy; CI has it beside the clone
            assert src["quote"] in " ".join(summary.read_text().split())


def test_bf16_on_other_kernels_gets_the_measured_cross_kernel_tolerance():
    amx = {"dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx10_1_512_amx"}, "torch_threads": 1}
    avx = {"dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx512_core_bf16"}, "torch_threads": 1}
    ref = make_reference(_result([3, 7], 2.0).replace(environment=amx), Tolerance(), "t")
    near = _result([3, 7], 2.0 * (1 + 1.5e-3)).replace(environment=avx)
    problems, notes = compare(near, ref)
    assert problems == [] and "other matmul kernels" in notes[0]
    assert compare(near.replace(environment=amx), ref)[0]  # the same kernels keep the grid's 1e-4
    assert compare(near.replace(environment={**amx, "torch_threads": 2}), ref)[0] == []  # another thread count
    assert compare(_result([3, 7], 2.0 * (1 + 3e-3)).replace(environment=avx), ref)[0]  # beyond what was measured


def test_a_kernel_sensitive_searchers_other_set_is_not_checkable_on_other_kernels():
    """bo's GP fits follow the machine's kernels: its other set against a reference made elsewhere (or with no
    kernel record) is neither a pass nor a failure; on the reference's own kernels, and for a searcher steered by
    its losses alone, the exact check stands."""
    amx = {"dtype": "torch.float32", "torch_threads": 1, "kernels": {"capability": "AVX512", "amx_tile": True}}
    avx2 = {**amx, "kernels": {"capability": "AVX2", "amx_tile": True}}

    def run(search: str, removed: list[int], env: dict) -> Result:
        r = _result(removed, 2.0 if removed == [3, 7] else 2.1)  # not a near tie
        return r.replace(identity=dataclasses.replace(r.identity, search=search), environment=env)

    ref = make_reference(run("bo", [3, 7], avx2), Tolerance(), "t")
    assert ref["provenance"]["environment"]["kernels"] == avx2["kernels"]
    why = not_checkable(run("bo", [3, 8], amx), ref)
    assert why and "bo is steered by its GP fits" in why and "'AVX2'" in why
    assert not_checkable(run("bo", [3, 8], {**avx2, "torch_threads": 2}), ref)  # threads reorder sums too
    assert not_checkable(run("bo", [3, 8], avx2), ref) is None  # the reference's own kernels: exact
    assert not_checkable(run("bo", [3, 7], amx), ref) is None  # the same set: its loss and metrics are checked
    greedy = make_reference(run("greedy", [3, 7], avx2), Tolerance(), "t")
    assert not_checkable(run("greedy", [3, 8], amx), greedy) is None
    unrecorded = {**ref, "provenance": {**ref["provenance"], "environment": {"dtype": "torch.float32"}}}
    assert "with no kernel record" in (not_checkable(run("bo", [3, 8], avx2), unrecorded) or "")
    assert compare(run("bo", [3, 8], amx), ref)[0]  # compare() itself still reports the other set


def _fingerprinted(env: dict, fp32: str, bf16: str) -> dict:
    from depthprune.model.kernel_identity import VERSION

    fp = {"version": VERSION, "threads": env.get("torch_threads", 1), "float32": fp32, "bfloat16": bf16}
    return {**env, "kernels": {**env["kernels"], "fingerprint": fp}}


def test_fingerprints_decide_sameness_whatever_the_banners_say():
    """Issue 59: equal fingerprints are the same kernels, unequal ones other kernels, banners notwithstanding
    (an AMD EPYC's oneMKL names no ISA; two records both saying AVX512 may round differently)."""
    amx = {"dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx10_1_512_amx"}, "torch_threads": 1}
    avx = {"dtype": "torch.bfloat16", "kernels": {"bf16_matmul_kernel": "brg_matmul:avx512_core_bf16"}, "torch_threads": 1}
    ref = make_reference(_result([3, 7], 2.0).replace(environment=_fingerprinted(amx, "f", "b1")), Tolerance(), "t")
    near = _result([3, 7], 2.0 * (1 + 1.5e-3))
    # other banners, the same bits: the grid's own 1e-4 holds
    assert compare(near.replace(environment=_fingerprinted(avx, "f", "b1")), ref)[0]
    # the same banners, other bits: other kernels, the measured cross-kernel tolerance, said so
    problems, notes = compare(near.replace(environment=_fingerprinted(amx, "f", "b2")), ref)
    assert problems == [] and "kernel fingerprints differ (bfloat16 b2" in notes[0]
    # bo's other set: checkable exactly where the bits match, not where they differ
    fp32 = {"dtype": "torch.float32", "torch_threads": 1, "kernels": {"capability": "AVX512"}}

    def run(removed: list[int], env: dict) -> Result:
        r = _result(removed, 2.0 if removed == [3, 7] else 2.1)
        return r.replace(identity=dataclasses.replace(r.identity, search="bo"), environment=env)

    ref = make_reference(run([3, 7], _fingerprinted(fp32, "f1", "x")), Tolerance(), "t")
    assert not_checkable(run([3, 8], _fingerprinted(fp32, "f1", "y")), ref) is None  # a float32 run: its bits only
    why = not_checkable(run([3, 8], _fingerprinted(fp32, "f2", "x")), ref)
    assert why and "kernel fingerprints differ (float32 f2 at 1 threads here, f1 at 1 for the reference)" in why
