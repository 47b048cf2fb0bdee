"""A measured ``throughput.json`` (:mod:`depthprune.plan.device_check`) read for planning: the file's
checked fields, each stand-in shape's achieved rates, and the rate a plan applies to a model."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

from depthprune.common.jsonio import JSONFileError, read_json
from depthprune.plan.gpus import GPU, GPUS, gpu_kind
from depthprune.plan.shapes import ModelShape

#: The format ``depthprune measure device`` writes (``throughput.json``).
THROUGHPUT_SCHEMA = "depthprune-throughput/1"
#: Phases of a throughput file whose work is no-grad scoring (the forward rate) ...
FORWARD_PHASES = ("dense", "prior", "oneshot", "greedy")
#: ... and the one that is a gate-gradient pass (cbo's energy: the gradient rate).
GRADIENT_PHASE = "gate_gradient"
MEASURED_STATUSES = ("complete", "bounded")  # phases whose counted work really ran and was timed
PHASE_STATUSES = (*MEASURED_STATUSES, "skipped", "failed")


def phase_flops(shape: ModelShape, seq_len: int, tokens: int, layer_forwards: float, layer_backwards: float,
                head_passes: float) -> float:
    """FLOPs of measured work as a plan counts them (:func:`~depthprune.plan.grid_plan.plan_cell`): per token, each layer-forward one
    block, each layer-backward two, each head pass (a set scored) the output head once."""
    per_token = shape.layer_flops_per_token(seq_len)
    return tokens * ((layer_forwards + 2 * layer_backwards) * per_token + head_passes * shape.head_flops_per_token)


class ThroughputError(ValueError):
    """A throughput file the planner cannot use; the message names the file and the field."""


@dataclass(frozen=True)
class MeasuredRate:
    """What one stand-in shape of a throughput file achieved, in FLOPs as a plan counts them."""

    label: str  # the shape's name in the file, e.g. "llama3.1-8b"
    shape: ModelShape
    seq_len: int
    batch_size: int
    forward: float  # FLOP/s of the no-grad scoring phases (FORWARD_PHASES) together
    gradient: float | None  # FLOP/s of a gate-gradient pass; None where the file has none
    layer_forwards_per_second: float  # over the same forward phases
    phases: tuple[str, ...]  # the phases the forward rate comes from


@dataclass(frozen=True)
class Throughput:
    """A ``throughput.json`` read for planning: where, on what and when it was measured."""

    file: str
    gpu: str  # the device's name as torch reported it
    date: str
    rates: tuple[MeasuredRate, ...]
    finished: bool = True  # False: the run was stopped before its end (the file holds what it measured)

    @property
    def kind(self) -> str | None:
        return gpu_kind(self.gpu)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "gpu": self.gpu, "gpu_kind": self.kind, "date": self.date, "finished": self.finished,
                "rates": [{**asdict(r), "shape": asdict(r.shape)} for r in self.rates]}


class _Fields:
    """Typed reads of a JSON document; every error names the file and the field (``shapes[1].name``)."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, where: str, problem: str) -> NoReturn:
        raise ThroughputError(f"{self.file}: field {where}: {problem}")

    def get(self, obj: dict[str, Any], where: str) -> Any:
        key = where.rsplit(".", 1)[-1]
        if key not in obj:
            self.fail(where, "missing")
        return obj[key]

    def mapping(self, obj: dict[str, Any], where: str) -> dict[str, Any]:
        value = self.get(obj, where)
        if not isinstance(value, dict):
            self.fail(where, f"expected an object, got {value!r:.60}")
        return value

    def text(self, obj: dict[str, Any], where: str) -> str:
        value = self.get(obj, where)
        if not isinstance(value, str) or not value:
            self.fail(where, f"expected a non-empty string, got {value!r:.60}")
        return value

    def integer(self, obj: dict[str, Any], where: str, minimum: int = 0) -> int:
        value = self.get(obj, where)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(where, f"expected an integer >= {minimum}, got {value!r:.60}")
        return value

    def positive(self, obj: dict[str, Any], where: str) -> float:
        value = self.get(obj, where)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            self.fail(where, f"expected a number > 0, got {value!r:.60}")
        return float(value)


def _read_shape(f: _Fields, obj: dict[str, Any], where: str, label: str) -> ModelShape:
    dims = {k: f.integer(obj, f"{where}.{k}", 1) for k in ("layers", "hidden", "intermediate", "heads", "kv_heads",
                                                            "head_dim", "vocab")}
    tied = f.get(obj, f"{where}.tied")
    if not isinstance(tied, bool):
        f.fail(f"{where}.tied", f"expected true or false, got {tied!r:.60}")
    return ModelShape(label, dims["layers"], dims["hidden"], dims["intermediate"], dims["heads"], dims["kv_heads"],
                      dims["head_dim"], dims["vocab"], tied, f"{f.file}: {where}")


def _read_rate(f: _Fields, obj: dict[str, Any], where: str) -> MeasuredRate:
    """One shape's rates: the FLOPs of its measured phases (:func:`phase_flops`) over their seconds."""
    if not isinstance(obj, dict):
        f.fail(where, f"expected an object, got {obj!r:.60}")
    label = f.text(obj, f"{where}.name")
    shape = _read_shape(f, f.mapping(obj, f"{where}.shape"), f"{where}.shape", label)
    calib = f.mapping(obj, f"{where}.calibration")
    seq_len = f.integer(calib, f"{where}.calibration.seq_len", 1)
    batch_size = f.integer(calib, f"{where}.calibration.batch_size", 1)
    tokens = f.integer(calib, f"{where}.calibration.tokens", 1)
    phases = f.mapping(obj, f"{where}.phases")
    flops = seconds = forwards = 0.0
    used: list[str] = []
    gradient = None
    for name in (*FORWARD_PHASES, GRADIENT_PHASE):
        if name not in phases:
            continue
        at = f"{where}.phases.{name}"
        rec = f.mapping(phases, at)
        status = f.get(rec, f"{at}.status")
        if status not in PHASE_STATUSES:
            f.fail(f"{at}.status", f"expected one of {', '.join(PHASE_STATUSES)}, got {status!r:.60}")
        if status not in MEASURED_STATUSES:
            continue
        sec = f.positive(rec, f"{at}.seconds")
        work = [f.integer(rec, f"{at}.{k}") for k in ("layer_forwards", "layer_backwards", "evaluations")]
        done = phase_flops(shape, seq_len, tokens, *work)
        if name == GRADIENT_PHASE:
            gradient = done / sec if done > 0 else None
        elif work[0] > 0:
            flops, seconds, forwards = flops + done, seconds + sec, forwards + work[0]
            used.append(name)
    if not used:
        f.fail(f"{where}.phases", f"no measured forward phase (one of {', '.join(FORWARD_PHASES)} with status "
                                  f"{' or '.join(MEASURED_STATUSES)} and layer_forwards > 0)")
    return MeasuredRate(label, shape, seq_len, batch_size, flops / seconds, gradient, forwards / seconds, tuple(used))


def load_throughput(path: str | Path) -> Throughput:
    """Read and check a ``throughput.json`` (:mod:`depthprune.plan.device_check`); raises :class:`ThroughputError`."""
    file = str(path)
    try:
        data = read_json(path)
    except OSError as err:
        raise ThroughputError(f"{file}: cannot be read ({err.strerror or err})") from None
    except JSONFileError as err:
        raise ThroughputError(f"{file}: not a JSON file ({err.problem})") from None
    f = _Fields(file)
    if not isinstance(data, dict):
        f.fail("(top level)", f"expected an object, got {type(data).__name__}")
    schema = f.get(data, "schema")
    if schema != THROUGHPUT_SCHEMA:
        f.fail("schema", f"expected {THROUGHPUT_SCHEMA!r}, got {schema!r:.60}")
    gpu = f.text(f.mapping(data, "environment"), "environment.device_name")
    shapes = f.get(data, "shapes")
    if not isinstance(shapes, list) or not shapes:
        f.fail("shapes", f"expected a non-empty list, got {shapes!r:.60}")
    rates = tuple(_read_rate(f, s, f"shapes[{i}]") for i, s in enumerate(shapes))
    finished = f.get(data, "finished")
    if not isinstance(finished, bool):
        f.fail("finished", f"expected true or false, got {finished!r:.60}")
    return Throughput(file, gpu, f.text(data, "created"), rates, finished)


@dataclass(frozen=True)
class Rate:
    """FLOP per hour a plan assumes for one model: forward work, and gate-gradient passes (cbo)."""

    forward: float
    gradient: float
    source: str = ""  # where it comes from, one sentence (empty: the assumed MFU)


def _dims(s: ModelShape) -> tuple[int, ...]:
    return s.layers, s.hidden, s.intermediate, s.heads, s.kv_heads, s.head_dim, s.vocab


def _describe(s: ModelShape) -> str:
    return f"{s.layers} layers, hidden {s.hidden}, MLP {s.intermediate}, heads {s.heads}/{s.kv_heads}, vocab {s.vocab}"


def _times(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def measured_rate(shape: ModelShape, gpu: GPU, t: Throughput) -> Rate:
    """``shape``'s rate from the file: the measurement at the same shape, else the one nearest in block
    size, its achieved FLOP/s applied to this model's FLOPs; scaled by dense bf16 peaks where the file
    was measured on another GPU kind than the plan's. The sentence says which and how."""
    same = [r for r in t.rates if _dims(r.shape) == _dims(shape)]
    r = same[0] if same else min(t.rates, key=lambda m: abs(math.log(m.shape.layer_params / shape.layer_params)))
    if same:
        how = "measured at this shape" + ("" if r.label == shape.model else f" (the file's {r.label})")
    else:
        seq = r.seq_len
        how = (f"not measured at this shape: {r.label}'s ({_describe(r.shape)}) achieved FLOP/s applied to "
               f"{shape.model}'s FLOPs ({_describe(shape)}; per token, its block "
               f"{_times(shape.layer_flops_per_token(seq) / r.shape.layer_flops_per_token(seq))} and its head "
               f"{_times(shape.head_flops_per_token / r.shape.head_flops_per_token)} the measured shape's)")
    scale, on = 1.0, ""
    kind = t.kind
    if kind is None:
        on = f"; measured on {t.gpu!r}, which is no --gpu kind: used as is for the {gpu.name}"
    elif GPUS[kind] != gpu:
        scale = gpu.bf16_tflops / GPUS[kind].bf16_tflops
        on = f"; scaled from the {GPUS[kind].name} to the {gpu.name} by their dense bf16 peaks (x{scale:.2f})"
    forward = r.forward * scale
    gradient = (r.gradient if r.gradient is not None else r.forward) * scale
    grad_text = (f"{gradient / 1e12:,.3g} TFLOP/s in gate-gradient passes" if r.gradient is not None
                 else "gate-gradient passes at the forward rate (none measured)")
    source = (f"{shape.model}: {forward / 1e12:,.3g} TFLOP/s forward ({forward / (gpu.bf16_tflops * 1e10):.3g} % of "
              f"the {gpu.name}'s peak; {r.layer_forwards_per_second * scale:,.3g} layer-forwards/s of "
              f"{r.batch_size} x {r.seq_len} tokens, from {', '.join(r.phases)}), {grad_text}; {how}{on}")
    return Rate(forward * 3600, gradient * 3600, source)


def throughput_lines(t: Throughput, rates: dict[str, Rate], micro: dict[str, tuple[int, int]]) -> list[str]:
    """What the time estimate rests on when it comes from a measurement: file, GPU, date, per model."""
    lines = [f"Throughput: measured, not assumed (--mfu is not used): {t.file}, {t.gpu}, {t.date}; FLOPs counted as "
             "this plan counts them, over the seconds of the suite's own scoring phases on random-weight stand-ins "
             "(depthprune.device_check)." + ("" if t.finished else " The run did not reach its end (stopped or "
                                                "killed): its file holds the phases it finished."),
             *(f"Measured rate, {rate.source}." for rate in rates.values())]
    measured = sorted({(r.batch_size, r.seq_len) for r in t.rates})
    other = {o: bs for o, bs in micro.items() if bs not in measured}
    if other:
        lines.append("Measured micro-batches differ: " + ", ".join(f"{b} x {s}" for b, s in measured)
                     + " tokens, this grid's " + ", ".join(f"{o} {b} x {s}" for o, (b, s) in other.items())
                     + "; rates are taken as they are (smaller micro-batches usually run at a lower rate).")
    return lines
