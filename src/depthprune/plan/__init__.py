"""Plan a grid before it runs: layer-forwards, FLOPs, GPU-hours and memory, per cell and in total.

    depthprune plan --grid paper --gpu h100-80gb --gpus 8 [--json plan.json]

Counting uses the code that runs. A searcher's requests are produced by running the
searcher itself on a *loss landscape* and are counted with :func:`depthprune.scoring.scorer.replay_cost`,
the function that counts every result's ``cost`` (the same memo and prefix-cache policy,
the prior charged the same way), so a plan and a result count the same thing:

* evaluations — from the settings alone where they fix them (``oneshot``, ``greedy``, ``cbo``:
  exact), otherwise bounds from the settings (``beam``: each pair of beam sets shares at
  most one child; ``fbs``: its rounds; ``ga``, ``bo``: their evaluation limits);
* layer-forwards — which layers a searcher removes decides how much of the prefix cache
  it re-uses, so the count depends on the losses, even for ``oneshot``. The planner runs each
  searcher on ``landscapes`` synthetic loss landscapes
  (:class:`~depthprune.plan.simulation.SyntheticLandscape`, ours) and reports their mean and range
  beside the bound that needs no losses at all (every set from the embeddings). ``bo`` is not
  simulated (a GP fit per evaluation): its count is the bound, scaled by the prefix-cache ratio
  measured in ``measured`` results when there are any;
* on recorded losses (a result's dense loss, prior and trace:
  :func:`~depthprune.plan.simulation.recorded_losses`) the simulation reproduces a run exactly for
  every searcher whose path is a function of the losses (``oneshot``, ``greedy``, ``beam``, ``ga``,
  ``fbs``): :func:`~depthprune.plan.simulation.check_result` compares the two, which is how a
  rehearsal's counted layer-forwards check the planner (and a test checks it on the tiny model).

FLOPs use the real models' shapes (:data:`~depthprune.plan.shapes.SHAPES`, from their
``config.json``), tokens the case file's calibration and evaluation sizes, time a named GPU
(:data:`~depthprune.plan.gpus.GPUS`) at an assumed model-FLOPs utilisation, and memory the
scorer's own prefix-cache budget (:func:`depthprune.scoring.scorer._default_cache_bytes`: 40 % of free
GPU memory). Every assumption is a field of :class:`~depthprune.plan.assumptions.Assumptions` and
is printed with the plan (:func:`~depthprune.plan.assumptions.assumption_lines`).

One module per job; this package re-exports the names its callers use:

* :mod:`depthprune.plan.gpus` -- the GPU catalogue, and which entry a device name is;
* :mod:`depthprune.plan.shapes` -- model shapes (depths from the model registry);
* :mod:`depthprune.plan.throughput` -- a measured ``throughput.json`` read, and the rate it gives a model;
* :mod:`depthprune.plan.assumptions` -- what a plan assumes, and the sentences printed with it;
* :mod:`depthprune.plan.simulation` -- searchers run on loss landscapes, synthetic or recorded;
* :mod:`depthprune.plan.bounds` -- evaluations and layer-forwards from the settings alone;
* :mod:`depthprune.plan.grid_plan` -- a grid's cells planned, with totals, tasks and notes;
* :mod:`depthprune.plan.format` -- the plan as text;
* :mod:`depthprune.plan.device_check` -- ``depthprune measure device``, the GPU throughput check that writes the
  ``throughput.json`` a plan can read (with :mod:`depthprune.plan.device_env` and
  :mod:`depthprune.plan.device_phases`; not imported here: a tool module is imported when its command runs).
"""

from __future__ import annotations

from depthprune.plan.assumptions import (
    EVAL_TASKS,
    Assumptions,
    assumption_lines,
)
from depthprune.plan.bounds import (
    evaluation_bounds,
    forwards_bound,
)
from depthprune.plan.format import (
    format_plan,
)
from depthprune.plan.gpus import (
    GPU,
    GPUS,
    gpu_kind,
)
from depthprune.plan.grid_plan import (
    CellPlan,
    GridPlan,
    Memory,
    calibration_tokens,
    makespan,
    plan_cell,
    plan_grid,
)
from depthprune.plan.shapes import (
    SHAPES,
    ModelShape,
    model_shape,
)
from depthprune.plan.simulation import (
    NotRecorded,
    RecordedLosses,
    Simulated,
    SyntheticLandscape,
    check_result,
    recorded_losses,
    simulate,
)
from depthprune.plan.throughput import (
    FORWARD_PHASES,
    GRADIENT_PHASE,
    THROUGHPUT_SCHEMA,
    MeasuredRate,
    Rate,
    Throughput,
    ThroughputError,
    load_throughput,
    measured_rate,
    phase_flops,
    throughput_lines,
)

__all__ = ["Assumptions", "CellPlan", "EVAL_TASKS", "FORWARD_PHASES", "GPU", "GPUS", "GRADIENT_PHASE", "GridPlan",
           "MeasuredRate", "Memory", "ModelShape", "NotRecorded", "Rate", "RecordedLosses", "SHAPES", "Simulated",
           "SyntheticLandscape", "THROUGHPUT_SCHEMA", "Throughput", "ThroughputError", "assumption_lines",
           "calibration_tokens", "check_result", "evaluation_bounds", "format_plan", "forwards_bound", "gpu_kind",
           "load_throughput", "makespan", "measured_rate", "model_shape", "phase_flops", "plan_cell", "plan_grid",
           "recorded_losses", "simulate", "throughput_lines"]
