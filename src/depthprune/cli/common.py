"""What the ``depthprune`` commands share: exit statuses, the usage error, argument types,
the up-front destination check and the model flags.

Imported by the command modules of :mod:`depthprune.cli`; the package modules it needs
(objectives, profiles, case files) are imported inside the functions, when a command runs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depthprune.common.errors import InputError

if TYPE_CHECKING:
    from depthprune.results.schema import Result


def layers_arg(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated layer indices, each once, sorted."""
    try:
        layers = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated layer indices like 3,7,9, got {text!r}") from None
    twice = sorted({i for i in layers if layers.count(i) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"layer {', '.join(map(str, twice))} given twice in {text!r}; "
                                         "each layer is removed once")
    return tuple(sorted(layers))


def kv_arg(text: str) -> tuple[str, Any]:
    """An argparse type: KEY=VALUE, the value parsed as JSON where it is JSON."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def positive(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def tasks_arg(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated task names."""
    return tuple(t.strip() for t in text.split(",") if t.strip())


def check_destination(path: str | None, flag: str, kind: str = "file", overwrite: bool = True) -> None:
    """Decide up front whether writing ``path`` will work, by doing what the write will do.

    The write creates missing parent directories under the nearest existing ancestor, so
    that ancestor must be a directory in which a file can really be created: this is
    probed with a temporary file (removed at once), which also catches read-only mounts,
    ``/proc`` and paths under a regular file, where a permission check would pass.
    """
    if path is None:
        return
    p = Path(path).expanduser()
    if p.exists():
        if kind == "file" and p.is_dir():
            raise InputError(f"{flag} {path}: is a directory, expected a file path")
        if kind == "dir" and not p.is_dir():
            raise InputError(f"{flag} {path}: exists and is not a directory")
        if kind == "dir" and any(p.iterdir()) and not overwrite:
            raise InputError(f"{flag} {path}: directory exists and is not empty (pass --overwrite)")
    ancestor = p if kind == "dir" and p.is_dir() else p.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{flag} {path}: {ancestor} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=ancestor, prefix=".depthprune-probe-"):
            pass
    except OSError as err:
        raise InputError(f"{flag} {path}: cannot create files in {ancestor} ({err.strerror or err})") from None


def model_spec(model: str) -> Any:
    """``--model``'s :class:`~depthprune.model.registry.ModelSpec`, or the InputError (exit 2) that names the flag."""
    from depthprune.model import WeightsUnavailable, resolve

    try:
        return resolve(model)
    except WeightsUnavailable as err:
        raise InputError(f"--model {model}: {err}") from None
    except ValueError as err:
        raise InputError(f"--model: {err}") from None


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The flags that name a model and how to load it (``prune``, ``evaluate``)."""
    from depthprune.data.profiles import PROFILES

    p.add_argument("--model", required=True, help="registry id (e.g. tiny-llama3, llama3-8b), local dir or Hub id")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--dtype", default="auto",
                   help="auto (bf16 on cuda; on a cpu bf16 where its bf16 matmuls run on AMX, else fp32) | float32 | bfloat16 | float16")
    p.add_argument("--allow-download", action="store_true", help="let transformers fetch missing weights from the Hub")
    p.add_argument("--profile", choices=tuple(PROFILES), default=None,
                   help="data profile (default: the model's; local/Hub models use 'paper')")


#: Objective-size flags and the objective fields they set, first match wins.
SIZE_FLAGS = {
    "--calib-samples": ("calib_samples", ("n_samples", "n_items")),
    "--seq-len": ("seq_len", ("seq_len",)),
    "--calib-seed": ("calib_seed", ("seed",)),
}


def objective_params_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """Map the size flags onto the objective's own fields; refuse a flag that does not apply."""
    from depthprune.objectives import OBJECTIVES, objective_fields

    fields = objective_fields(args.objective)
    params: dict[str, Any] = {}
    for flag, (dest, candidates) in SIZE_FLAGS.items():
        value = getattr(args, dest)
        if value is None:
            continue
        target = next((f for f in candidates if f in fields), None)
        if target is None:
            applies = [n for n in OBJECTIVES.names() if set(candidates) & objective_fields(n)]
            raise InputError(f"{flag} does not apply to --objective {args.objective} (it has no "
                             f"{' or '.join(candidates)}); it applies to: {', '.join(applies)}")
        params[target] = value
    for key, value in args.objective_param or []:
        if key not in fields:
            raise InputError(f"--objective-param {key}: objective {args.objective!r} has no such parameter; "
                             f"allowed: {', '.join(sorted(fields))}")
        params[key] = value
    return params


def result_summary(result: Result) -> list[str]:
    """The lines both ``prune`` and ``cell`` print; the cost line is the result's own."""
    ident, cost = result.identity, result.cost
    removed = ",".join(map(str, result.removed))
    lines = [
        f"model      {ident.model} ({result['n_layers']} layers, weights {ident.weights})",
        f"objective  {ident.objective}  dense loss {result['dense_calibration_loss']:.6f}",
        f"search     {ident.search}  budget {ident.budget}  seed {ident.search_seed}",
        f"removed    {removed}",
        f"loss       {result['calibration_loss']:.6f}  "
        f"(+{result['calibration_loss'] - result['dense_calibration_loss']:.6f} vs dense)",
        f"cost       {cost['evaluations']} evaluations, {cost['layer_forwards']} layer-forwards, "
        f"{cost['layer_backwards']} layer-backwards (as if alone); {cost['seconds']:.2f} s",
    ]
    if result.get("evaluated"):
        m = result["metrics"]
        shown = [f"{k} {v:.4f}" for k, v in m.items() if k in ("wikitext2_ppl", "c4_ppl", "avg_acc")]
        lines.append(f"metrics    {', '.join(shown)}")
    return lines



def load_grid(cases: str, name: str) -> Any:
    """The named grid of ``cases`` or a InputError naming the flag and what is allowed."""
    from depthprune.grid.cases import CaseFileError, load_grids

    if not Path(cases).is_dir():
        raise InputError(f"--cases {cases}: not a directory of case files")
    try:
        grids = {g.name: g for g in load_grids(cases)}
    except CaseFileError as err:
        raise InputError(str(err)) from None
    if name not in grids:
        raise InputError(f"--grid {name}: no such grid in {cases}; allowed: {', '.join(grids)}")
    return grids[name]


def fraction(text: str) -> float:
    """An argparse type: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value

