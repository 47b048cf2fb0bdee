"""The healing band (depthprune.healing.band, measured by depthprune.healing.band_heals): its measuring sets by the
written rule, twice the largest relative difference of two runs, and the command's bad input (exit 2, nothing
healed or written)."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from depthprune.common.errors import InputError
from depthprune.healing import band, band_heals


def _result(model: str, removed: list[int], grid: str = "tiny"):
    return {"removed": removed, **{"identity": SimpleNamespace(grid=grid, model=model)}}


class _R(dict):
    @property
    def identity(self):
        return self["identity"]


def test_the_measuring_sets_are_the_models_other_sets_by_size_then_blocks():
    rows = [_R(_result("tiny-llama3", s)) for s in ([2, 6, 9], [12, 13, 14], [2, 6, 7], [1, 2, 3, 4, 5], [2, 6, 7],
                                                   [0, 1, 2, 3, 4, 5, 6], [11, 13, 14], [1, 3, 4, 5, 6])]
    rows += [_R(_result("tiny-qwen3", [0, 1, 2])), _R(_result("tiny-llama3", [0, 1, 2], grid="controls")),
             _R(_result("tiny-llama3", []))]
    assert band.measuring_sets(rows, "tiny-llama3", (2, 6, 9)) == [
        (2, 6, 7), (11, 13, 14), (12, 13, 14), (1, 2, 3, 4, 5), (1, 3, 4, 5, 6), (0, 1, 2, 3, 4, 5, 6)]
    many = [_R(_result("tiny-llama3", [i, i + 1])) for i in range(10)]
    assert len(band.measuring_sets(many, "tiny-llama3", ())) == band.MEASURING


def _env(capability: str) -> dict:
    return {"device": "cpu", "dtype": "torch.float32",
            "kernels": {"capability": capability, "fp32_matmul_isa": capability.lower()}}


def test_the_band_is_twice_the_largest_relative_difference_of_each_quantity():
    ref = {"environment": _env("AVX512"), "records": {"a": {"losses": [2.0, 1.0], "probe_nll": [3.0, 4.0]},
                                                       "b": {"losses": [2.0, 1.5], "probe_nll": [3.0, 5.0]}}}
    here = {"environment": _env("AVX2"), "records": {"a": {"losses": [2.0, 1.001], "probe_nll": [3.0, 4.0]},
                                                      "b": {"losses": [2.002, 1.5], "probe_nll": [3.003, 5.0]}}}
    measured = band.measure(ref, here)
    assert measured["pair"] == "fp32/cpu-avx2 | fp32/cpu-avx512" and measured["sets"] == ["a", "b"]
    assert measured["band"]["losses"] == pytest.approx(2 * 1e-3)
    assert measured["band"]["probe_nll"] == pytest.approx(2 * 1e-3)
    assert band.band_for({measured["pair"]: measured}, _env("AVX2"), _env("AVX512")) is measured
    assert band.band_for({measured["pair"]: measured}, _env("AVX512"), _env("AVX512")) is None
    with pytest.raises(ValueError, match="share no measuring heal"):
        band.measure(ref, {**here, "records": {"c": here["records"]["a"]}})


def _args(**kw) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    band_heals.add_arguments(p)
    argv = [x for k, v in kw.items() for x in (f"--{k}", str(v))]
    return p.parse_args(argv)


def test_bad_input_stops_before_any_heal_and_names_the_option(tmp_path, monkeypatch):
    monkeypatch.setattr(band_heals, "heal_measuring_sets", lambda *a, **k: pytest.fail("healed on bad input"))
    existing = tmp_path / "heals.json"
    existing.write_text("{}")
    not_json = tmp_path / "other" / "bad.json"
    not_json.parent.mkdir()
    not_json.write_text("{")
    empty = tmp_path / "empty"
    empty.mkdir()
    for args, message in [
        (_args(), "give --heals OUT, or --reference FILE with --here FILE"),
        (_args(heals=existing, reference=existing), "give --heals OUT"),
        (_args(heals=existing), "exists; measuring heals are not overwritten"),
        (_args(heals=tmp_path / "new.json", archive=empty), "no tiny-grid result of tiny-llama3"),
        (_args(reference=existing), "--reference and --here go together"),
        (_args(reference=tmp_path / "missing.json", here=existing), "--reference"),
        (_args(reference=not_json, here=existing), "not JSON"),
        (_args(reference=existing, here=existing), "no field records, environment"),
    ]:
        with pytest.raises(InputError, match=message):
            band_heals.run(args)
    assert not (tmp_path / "new.json").exists() and not band.bands_path(tmp_path).exists()


def test_a_band_is_written_by_its_pair_beside_the_others(tmp_path, monkeypatch):
    ref = {"environment": _env("AVX512"), "records": {"a": {"losses": [1.0], "probe_nll": [2.0]}}}
    here = {"environment": _env("AVX2"), "records": {"a": {"losses": [1.0], "probe_nll": [2.002]}}}
    (tmp_path / "ref.json").write_text(json.dumps(ref))
    (tmp_path / "here.json").write_text(json.dumps(here))
    band.bands_path(tmp_path).parent.mkdir(parents=True)
    band.bands_path(tmp_path).write_text(json.dumps({"other | pair": {"band": {}}}))
    assert band_heals.run(_args(reference=tmp_path / "ref.json", here=tmp_path / "here.json", root=tmp_path)) == 0
    written = json.loads(band.bands_path(tmp_path).read_text())
    assert set(written) == {"other | pair", "fp32/cpu-avx2 | fp32/cpu-avx512"}
    assert written["fp32/cpu-avx2 | fp32/cpu-avx512"]["band"]["probe_nll"] == pytest.approx(2e-3)
