"""The first GPU contact, prepared (depthprune.plan.device_check): the command runs the suite's phases on
stand-ins with only what the device has, its JSON is what the planner reads, and the working tree fits
what the device tool carries."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune.cli import main as cli
from depthprune.grid.cases import load_grid
from depthprune.plan import (
    FORWARD_PHASES,
    GPUS,
    SHAPES,
    Assumptions,
    calibration_tokens,
    device_check,
    load_throughput,
    measured_rate,
    model_shape,
    phase_flops,
    plan_grid,
)

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("build", "dense", "head", "gate_weights", "gate_gradient", "prior", "oneshot", "greedy", "cbo")
#: absent on the device: the command must run without them (a finder that refuses to import them)
RUNNER = """
import importlib.abc, runpy, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("datasets", "lm_eval", "gguf"):
            raise ModuleNotFoundError(f"No module named {name!r} (absent on the device)")
sys.meta_path.insert(0, Absent())
sys.argv = ["depthprune.cli", "measure", "device", *sys.argv[1:]]
runpy.run_module("depthprune.cli", run_name="__main__", alter_sys=True)
"""


# One worker for the module: the device command's tiny run (module fixture, ~7 s) then runs once, not per xdist worker.
pytestmark = pytest.mark.xdist_group("device-check")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """The device command at --size tiny --device cpu, as the device runs it (PYTHONPATH=src)."""
    out = tmp_path_factory.mktemp("device")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DEPTHPRUNE_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", RUNNER, "--out", str(out), "--size", "tiny", "--device", "cpu"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote" in proc.stdout and "failed phases: none" in proc.stdout
    return out / "throughput.json"


def test_tiny_run_writes_every_phase(tiny_run):
    data = json.loads(tiny_run.read_text())
    assert data["schema"] == "depthprune-throughput/1" and data["finished"]
    env = data["environment"]
    for key in ("device_name", "torch", "transformers", "cuda", "bf16_supported", "tf32_matmul", "tf32_cudnn",
                "float32_matmul_precision"):
        assert key in env
    assert [s["name"] for s in data["shapes"]] == ["tiny-64", "tiny-96"]
    for s in data["shapes"]:
        assert s["params"] == s["planned_params"]  # the stand-in has exactly the planner's shape
        assert math.isfinite(s["dense_loss"])
        assert set(s["phases"]) == set(PHASES)
        for name, p in s["phases"].items():
            assert p["status"] == "complete", (s["name"], name, p["note"])
            assert p["seconds"] > 0 and p["wall_seconds"] >= p["seconds"] * 0.999 and p["peak_memory_bytes"] > 0
            if name == "head":
                assert p["evaluations"] == 1 and p["achieved_tflops"] > 0 and p["layer_forwards"] == 0
            elif name != "build":
                assert p["layer_forwards"] > 0 and p["layer_forwards_per_second"] > 0
                assert p["tokens_per_second"] > 0 and p["achieved_tflops"] > 0
        L = s["shape"]["layers"]
        phases = s["phases"]
        assert phases["dense"]["layer_forwards"] == L and phases["dense"]["evaluations"] == 1
        assert (phases["gate_gradient"]["layer_forwards"], phases["gate_gradient"]["layer_backwards"]) == (L, L)
        assert phases["prior"]["evaluations"] == L
        for searcher in ("oneshot", "greedy", "cbo"):
            assert len(phases[searcher]["removed"]) == device_check.BUDGET
            assert phases[searcher]["counted_layer_forwards"] > 0
        assert phases["cbo"]["layer_backwards"] == L * (L + 1)  # Scorer.energy: L+1 gradient passes


def test_a_bounded_run_stops_and_extrapolates(tmp_path, capsys):
    """With no time, greedy runs one new set and is extrapolated; cbo is skipped; the planner still reads it."""
    assert cli(["measure", "device", "--out", str(tmp_path), "--size", "tiny", "--device", "cpu", "--budget-s", "0"]) == 0
    text = capsys.readouterr().out
    assert "EXTRAPOLATED, not measured" in text
    data = json.loads((tmp_path / "throughput.json").read_text())
    for s in data["shapes"]:
        phases = s["phases"]
        assert phases["prior"]["status"] == phases["oneshot"]["status"] == "complete"
        greedy = phases["greedy"]
        assert greedy["status"] == "bounded" and greedy["evaluations"] == 1  # overruns by at most one set
        assert greedy["extrapolated"]["layer_forwards"] > greedy["layer_forwards"]
        assert phases["cbo"]["status"] == "skipped" and "estimated" in phases["cbo"]["note"]
    assert [r.phases for r in load_throughput(tmp_path / "throughput.json").rates] == [FORWARD_PHASES] * 2


def _plan(capsys, tmp_path, name, *extra):
    out = tmp_path / f"{name}.json"
    assert cli(["plan", "--grid", "tiny", "--cases", str(ROOT / "cases"), "--gpu", "h200-141gb", "--gpus", "2",
                "--landscapes", "1", "--json", str(out), *extra]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_plan_uses_the_measured_throughput(tiny_run, tmp_path, capsys):
    text0, plan0 = _plan(capsys, tmp_path, "assumed")
    text1, plan1 = _plan(capsys, tmp_path, "measured", "--throughput", str(tiny_run))
    assert "at 35% MFU" in text0.splitlines()[0] and "throughput" not in plan0
    head = text1.splitlines()[0]
    assert f"at measured throughput ({tiny_run}: cpu" in head and json.loads(tiny_run.read_text())["created"] in head
    assert "Throughput: measured, not assumed" in text1 and "Measured rate, tiny-llama3:" in text1
    assert "not measured at this shape" in text1  # the tiny models are not the stand-ins' shapes: said how it scaled
    assert "which is no --gpu kind" in text1  # measured on a CPU: not scaled by GPU peaks, and said so

    # the time is the plan's own FLOPs at the measured rates: forward work at the forward rate,
    # cbo's gate-gradient passes at theirs
    grid = load_grid(ROOT / "cases" / "tiny.toml")
    assumed = GPUS["h200-141gb"].bf16_tflops * 1e12 * 0.35 * 3600
    rates = plan1["throughput"]["per_model"]
    for c0, c1 in zip(plan0["cells"], plan1["cells"]):
        assert c0["search_tflop"] == c1["search_tflop"] and c0["gpu_hours"] != c1["gpu_hours"]
        forward = rates[c1["model"]]["forward_tflops"] * 1e12 * 3600
        gradient = rates[c1["model"]]["gradient_tflops"] * 1e12 * 3600
        flops = c0["gpu_hours"] * assumed
        seq = calibration_tokens(grid, c1["objective"], Assumptions())[1]
        per_token = model_shape(c1["model"]).layer_flops_per_token(seq)
        grad = c1["calibration_tokens"] * 3 * c1["layer_backwards"] * per_token
        assert (grad > 0) == (c1["search"] == "cbo")
        assert c1["gpu_hours"] == pytest.approx((flops - grad) / forward + grad / gradient, rel=1e-9)
    assert plan1["totals"]["gpu_hours_as_if_alone"] == pytest.approx(sum(c["gpu_hours"] for c in plan1["cells"]))


def test_measured_shape_and_gpu_scaling(tiny_run, tmp_path):
    """At the measured shape the rate is the measurement's; another shape or GPU kind is scaled, and said so."""
    data = json.loads(tiny_run.read_text())
    data["environment"]["device_name"] = "NVIDIA H200"
    big = SHAPES["llama3.1-8b"]
    data["shapes"][1]["name"] = "llama3.1-8b"
    data["shapes"][1]["shape"].update(layers=big.layers, hidden=big.hidden, intermediate=big.intermediate,
                                      heads=big.heads, kv_heads=big.kv_heads, head_dim=big.head_dim, vocab=big.vocab,
                                      tied=big.tied)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    t = load_throughput(path)
    measured = t.rates[1]
    assert t.kind == "h200-141gb" and measured.shape.layers == big.layers
    phases = data["shapes"][1]["phases"]
    calib = data["shapes"][1]["calibration"]
    flops = sum(phase_flops(big, calib["seq_len"], calib["tokens"], phases[p]["layer_forwards"],
                            phases[p]["layer_backwards"], phases[p]["evaluations"]) for p in FORWARD_PHASES)
    assert measured.forward == pytest.approx(flops / sum(phases[p]["seconds"] for p in FORWARD_PHASES))

    same = measured_rate(SHAPES["llama3.1-8b"], GPUS["h200-141gb"], t)
    assert same.forward == pytest.approx(measured.forward * 3600) and "measured at this shape" in same.source
    twin = measured_rate(SHAPES["llama3-8b"], GPUS["h200-141gb"], t)  # llama3-8b has llama3.1-8b's shape
    assert twin.forward == same.forward and "the file's llama3.1-8b" in twin.source
    qwen = measured_rate(SHAPES["qwen3-8b"], GPUS["h200-141gb"], t)
    assert qwen.forward == same.forward and "not measured at this shape: llama3.1-8b's" in qwen.source
    a100 = measured_rate(SHAPES["llama3.1-8b"], GPUS["a100-80gb"], t)
    assert a100.forward == pytest.approx(same.forward * 312 / 989) and "by their dense bf16 peaks" in a100.source
    plan = plan_grid(load_grid(ROOT / "cases" / "paper.toml"), Assumptions(gpu="h200-141gb", landscapes=1), t)
    assert plan.throughput is t and any("Measured rate, qwen3-8b" in line for line in plan.assumption_text())


@pytest.mark.parametrize("break_it, field", [
    (lambda d: d["shapes"][1]["phases"]["greedy"].update(seconds="fast"), "shapes[1].phases.greedy.seconds"),
    (lambda d: d["shapes"][0]["shape"].pop("hidden"), "shapes[0].shape.hidden"),
    (lambda d: d["environment"].pop("device_name"), "environment.device_name"),
    (lambda d: d["shapes"][0]["phases"]["prior"].update(status="done"), "shapes[0].phases.prior.status"),
    (lambda d: d.update(schema="something-else/9"), "schema"),
    (lambda d: d.pop("finished"), "finished"),
    (lambda d: [p.update(status="failed") for p in d["shapes"][0]["phases"].values()], "shapes[0].phases"),
])
def test_a_malformed_throughput_file_is_a_usage_error(tiny_run, tmp_path, capsys, break_it, field):
    data = json.loads(tiny_run.read_text())
    break_it(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert cli(["plan", "--grid", "tiny", "--cases", str(ROOT / "cases"), "--throughput", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--throughput {bad}: field {field}:" in err, err


def test_an_unreadable_throughput_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "missing.json"):
        assert cli(["plan", "--grid", "tiny", "--cases", str(ROOT / "cases"), "--throughput", str(path)]) == 2
        assert f"--throughput {path}: " in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_the_working_tree_fits_what_the_device_tool_carries(capsys):
    """The repository's own files, tracked, fit. The CLI counts untracked files too, so its verdict is checked
    against what it printed, not against the limit: other tests' transient files in the same checkout raced with
    a check of its exit code (CI on an AMD EPYC, 2026-12-07: 74.7 MB counted, 54.6 MB tracked; again at 06608b2,
    1,244 files and 71.55 MiB against 1,196 tracked)."""
    total, files = device_check.tree_bytes(ROOT, untracked=False)
    assert 0 < total < device_check.TREE_LIMIT
    code = cli(["measure", "device", "--tree-size"])  # tracked and untracked, from the module's checkout
    said = re.search(r"(\d+) files, ([\d.]+) MiB \(limit 64 MiB\)", capsys.readouterr().out)
    assert said and int(said.group(1)) >= files and float(said.group(2)) >= round(total / 2**20, 2) - 0.005
    assert code == (0 if float(said.group(2)) < device_check.TREE_LIMIT / 2**20 else 1)
