"""Re-measurement: archived cells' losses scored again on this machine, checked against a band.

Each model is loaded once and each condition (model, objective and its recorded parameters) is
calibrated once; its scorer serves every cell of the condition, so a set scored for one cell is
not scored again for another. Per cell (the sample rule, fixed before any run):

* the removed set, always: a change of its loss beyond the band is caught with probability 1;
* both sets of every decision replay found (:class:`depthprune.verify.replay.Decision`: the final
  one and one per batch; the prior's cut compares singles, which the calibration re-scores anyway);
* ``SAMPLE_SETS`` more sets of the trace, drawn with a generator seeded by the seed and the cell id,
  from those that are not the condition's measuring sets (:func:`depthprune.verify.remeasure.held_out`, :mod:`depthprune.verify.bands`).

Every loss must lie within the band of the recorded one (rule 4 of :mod:`depthprune.verify.bands`: relative
to the recorded loss for ppl, in nats for margin; each set's z-score is kept, the cell's largest reported).
A decision whose recorded gap is wider than the band (the wider of its two sets') must come out the same
way here; one inside the band is a *numeric fork*: reported with both losses, never a failure. The
measuring sets (dense, singles, the held-out sets) are scored only by ``--measure-bands``, which measures
each model's bands on them before it checks that model's cells; without it the table is read and no prior
is computed.

The measuring sets are drawn from every cell of the condition in the results (``population``), not from
the selected ones only, so a cell's checked sample is the same whatever else is selected.

Then the removed set's evaluation: a seeded sample of its task items and perplexity windows evaluated
again and compared one by one (rule E3, :mod:`depthprune.verify.evaluation`), once per removed set of a
model whatever the number of cells that removed it.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from depthprune.jsonio import canonical
from depthprune.result import Result
from depthprune.verify import evaluation as ev
from depthprune.verify.bands import Band, Difference, EvalRow, lookup, numeric_class, pair_key
from depthprune.verify.replay import FAILED as REPLAY_FAILED
from depthprune.verify.replay import Decision, Replay, recorded_loss, recorded_trace, replay

#: trace sets re-scored per cell beside its removed set and decisions (the rule in the module docstring)
SAMPLE_SETS = 4


@dataclass(frozen=True)
class Sample:
    """How much of a cell is re-measured: which decisions' sets, how many more trace sets, and the share of
    changed items and windows the evaluation sample must catch with probability ``evaluation.CATCH``.

    ``FULL`` is the rule of the module docstring (the issue's 1% of items). ``CI`` is the smaller rule the
    suite's CI check of real cells runs on every CPU (``tests/real/test_verify_sample.py``): the cell's answer
    only (its removed set and the final decision's rival, the set it was chosen against), and the windows that
    catch a change to 20% of a dataset's windows. Its first version also sampled the items that catch a change
    to 5% of them (58 of the real grid's 1,809); its first run, on AMX against AMX records, failed both gemma3
    cells by 1 and 2 item flips of 58 where the item band allowed none: re-evaluating a sample batches the items
    otherwise, and bf16 rounds near-tied options the other way in 0.3-0.8% of the items even on the records'
    own kernels (``--measure-bands`` there: docs/verify.md). A zero allowance on 58 items cannot tell that from a
    change, so CI samples no items (``item_change`` None); the full sample checks them."""

    name: str
    decisions: tuple[str, ...]  # the decision kinds whose two sets are re-scored ("final", "step")
    extra_sets: int  # seeded trace sets beside them
    item_change: float | None  # None: no item is re-evaluated
    window_change: float


FULL = Sample("full", ("final", "step"), SAMPLE_SETS, 0.01, 0.01)
CI = Sample("ci", ("final",), 0, None, 0.20)
SAMPLES = {s.name: s for s in (FULL, CI)}
VERIFIED = "verified"
FAILED = "failed"
NOT_VERIFIED = "not verified"
#: failed here in another precision, verified by the second opinion in the recorded one (:mod:`depthprune.verify.second`)
BY_PRECISION = "verified in its recorded precision"


@dataclass
class Fork:
    """A decision inside the band: both sets' losses as recorded and as measured here."""

    decision: Decision
    chosen_here: float
    rival_here: float
    band: float  # the band it is inside (nats)

    @property
    def flipped(self) -> bool:
        return (self.rival_here - self.chosen_here) * (self.decision.rival_loss - self.decision.chosen_loss) < 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.decision.to_dict(), "chosen_here": self.chosen_here, "rival_here": self.rival_here,
                "flipped_here": self.flipped, "band": self.band}


@dataclass
class CellCheck:
    """What re-measuring one cell showed."""

    grid: str
    cell: str
    model: str
    objective: str
    recorded_class: str
    here_class: str
    replay: Replay
    status: str = VERIFIED
    band: Band | None = None
    sets_checked: int = 0
    largest_difference: float = 0.0
    largest_z: float | None = None  # rule 4: the largest |difference| / s_up of the cell's sets
    forks: list[Fork] = field(default_factory=list)
    disagreement: str | None = None  # the first, where FAILED; the reason, where NOT VERIFIED
    evaluation: ev.EvalCheck | None = None  # the removed set's items and windows (None: not re-evaluated)
    elapsed: float = 0.0  # seconds since the verification began, when this cell's check was done
    second: CellCheck | None = None  # the second opinion in the recorded precision, where this check failed

    def add_evaluation(self, check: ev.EvalCheck) -> None:
        """Fold the evaluation's outcome into the cell's: a failure fails the cell; an evaluation that
        could not be checked leaves a cell whose sets verified NOT VERIFIED, saying why."""
        self.evaluation = check
        if check.status == ev.FAILED and self.status != FAILED:
            self.status, self.disagreement = FAILED, f"evaluation: {check.disagreement}"
        elif check.status == ev.NOT_VERIFIED and self.status == VERIFIED:
            self.status, self.disagreement = NOT_VERIFIED, f"evaluation: {check.disagreement}"

    @property
    def label(self) -> str:
        if self.status == BY_PRECISION:
            return "VERIFIED IN ITS RECORDED PRECISION"
        if self.status == VERIFIED and self.forks:
            return f"VERIFIED WITH {len(self.forks)} NUMERIC FORK{'S' if len(self.forks) > 1 else ''}"
        return self.status.upper()

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid, "cell": self.cell, "model": self.model, "objective": self.objective,
                "status": self.label, "recorded": self.recorded_class, "here": self.here_class,
                "band": self.band.to_dict() if self.band else None, "sets_checked": self.sets_checked,
                "largest_difference": self.largest_difference, "largest_z": self.largest_z, "forks": [f.to_dict() for f in self.forks],
                "disagreement": self.disagreement, "replay": self.replay.to_dict(),
                "evaluation": self.evaluation.to_dict() if self.evaluation else None,
                "elapsed_seconds": round(self.elapsed, 3),
                "second_opinion": self.second.to_dict() if self.second else None}


def condition_key(result: Result) -> tuple[str, str, str]:
    """A result's condition: model, objective and the objective's parameters as canonical JSON (one scorer each)."""
    return result.identity.model, result.identity.objective, canonical(result["objective_params"])


def _always_checked(result: Result, rep: Replay, kinds: Collection[str] = FULL.decisions) -> list[frozenset[int]]:
    """A cell's sets that are always checked, in order: its removed set, then both sets of each decision of
    ``kinds`` (the prior's cut compares singles, which are measuring sets, never checked ones)."""
    out = [frozenset(result["removed"])]
    for d in rep.decisions:
        if d.kind in kinds:
            out += [frozenset(d.chosen), frozenset(d.rival)]
    return list(dict.fromkeys(out))


def held_out(cells: Sequence[Result], replays: Sequence[Replay], seed: int) -> list[frozenset[int]]:
    """A condition's measuring sets of size >= 2 (:mod:`depthprune.verify.bands`): per size,
    ``HELD_OUT`` trace sets that are no cell's removed set and no decision's set, drawn with a seed."""
    from depthprune.verify.bands import HELD_OUT

    protected = {s for r, rep in zip(cells, replays) for s in _always_checked(r, rep)}
    pool = sorted({frozenset(s) for r in cells for s, _ in r["trace"] if len(s) >= 2} - protected,
                  key=lambda s: (len(s), sorted(s)))
    condition = "|".join(map(str, condition_key(cells[0])))
    rng = random.Random(f"band:{seed}:{condition}")
    out: list[frozenset[int]] = []
    for size in sorted({len(s) for s in pool}):
        same = [s for s in pool if len(s) == size]
        out += rng.sample(same, min(HELD_OUT, len(same)))
    return out


def _sets_to_check(result: Result, rep: Replay, seed: int,
                   exclude: Collection[frozenset[int]] = frozenset(), sample: Sample = FULL) -> list[frozenset[int]]:
    """The rule of the module docstring, in order: removed set, decisions' sets, the seeded sample."""
    out = _always_checked(result, rep, sample.decisions)
    rest = sorted({s for s, _ in recorded_trace(result)} - set(out) - set(exclude),
                  key=lambda s: (len(s), sorted(s)))
    rng = random.Random(f"{seed}:{result['cell']}")
    out += rng.sample(rest, min(sample.extra_sets, len(rest)))
    return list(dict.fromkeys(out))


def condition_requests(cells: Sequence[Result], seed: int = 0, sample: Sample = FULL) -> list[frozenset[int]]:
    """The sets checked over ``cells``, every cell of one condition, in the cells' order (repeats kept), the
    measuring sets drawn from them left out: what :func:`remeasure` scores for a condition whose population is
    ``cells`` (``tools/verify_floor.py`` counts them, ``bench/test_bench_scoring.py`` times them)."""
    replays = [replay(r) for r in cells]
    held = set(held_out(cells, replays, seed))
    return [s for r, rep in zip(cells, replays) for s in _sets_to_check(r, rep, seed, held, sample)]


def _recorded_losses(result: Result) -> dict[frozenset[int], float]:
    losses = dict(recorded_trace(result))
    for i, v in enumerate(result.get("prior") or []):
        losses.setdefault(frozenset([i]), recorded_loss(v))
    losses.setdefault(frozenset(result["removed"]), float(result["calibration_loss"]))
    return losses


#: the band of a set whose recorded loss is the argument (rule 3 of :mod:`depthprune.verify.bands`)
BandFor = Callable[[float], "Band | None"]


def _band(band_for: BandFor, loss: float) -> Band:
    """A set's band once its cell has one (:func:`check_cell` returns NOT VERIFIED before asking otherwise)."""
    band = band_for(loss)
    if band is None:
        raise AssertionError(f"no band for a loss of {loss} although the cell's own loss has one")
    return band


def check_cell(result: Result, score: Callable[[list[frozenset[int]]], list[float]], band_for: BandFor,
               here_class: str, seed: int = 0, exclude: Collection[frozenset[int]] = frozenset(),
               rep: Replay | None = None, sample: Sample = FULL) -> CellCheck:
    """Replay one cell, then re-score its sets with ``score`` and check each against ``band_for(its recorded loss)``."""
    rep = rep or replay(result)
    check = CellCheck(str(result.identity.grid), result["cell"], result.identity.model, result.identity.objective,
                      numeric_class(result["environment"]), here_class, rep,
                      band=band_for(float(result["calibration_loss"])))
    if rep.status == REPLAY_FAILED:
        check.status, check.disagreement = FAILED, f"replay: {rep.disagreement}"
        return check
    if check.band is None:
        check.status = NOT_VERIFIED
        check.disagreement = (f"no band measured for {pair_key(check.recorded_class, here_class)} "
                              f"({check.objective}): re-measuring cannot tell rounding from a change")
        return check
    recorded = _recorded_losses(result)
    sets = _sets_to_check(result, rep, seed, exclude, sample)
    here = dict(zip(sets, score(sets)))
    check.sets_checked = len(sets)
    for s in sets:
        band = _band(band_for, recorded[s])
        diff = abs(here[s] - recorded[s]) if math.isfinite(recorded[s]) else (0.0 if not math.isfinite(here[s]) else math.inf)
        check.largest_difference = max(check.largest_difference, diff)
        z = band.z(diff)
        if z is not None:
            check.largest_z = max(check.largest_z or 0.0, z)
        if diff > band.nats and check.disagreement is None:
            check.status = FAILED
            check.disagreement = (f"set {sorted(s)}: recorded loss {recorded[s]:.6g}, here {here[s]:.6g}, "
                                  f"|difference| {diff:.3g} > band {band.nats:.3g} nats, {diff / band.nats:.2f}x it"
                                  + ("" if z is None else f", z {z:.1f}") + f" ({band.measured_for})")
    for d in rep.decisions:
        if d.kind not in sample.decisions:
            continue
        a, b = here[frozenset(d.chosen)], here[frozenset(d.rival)]
        width = max(_band(band_for, d.chosen_loss).nats, _band(band_for, d.rival_loss).nats)
        if d.gap <= width:
            check.forks.append(Fork(d, a, b, width))
        elif (b - a) * (d.rival_loss - d.chosen_loss) < 0 and check.disagreement is None:
            check.status = FAILED
            check.disagreement = (f"{d.kind} decision after evaluation {d.position}: recorded {list(d.chosen)} "
                                  f"{d.chosen_loss:.6g} against {list(d.rival)} {d.rival_loss:.6g} (gap {d.gap:.3g} > "
                                  f"band {width:.3g}); here {a:.6g} against {b:.6g}: the other way")
    return check


def band_differences(results: Sequence[Result], measured: dict[frozenset[int], float],
                     here_class: str) -> list[Difference]:
    """Recorded and here's loss of a condition's measuring sets (``measured``: set -> loss here; the empty set
    is the dense model), per recorded class, with each set's size."""
    out = []
    seen: set[str] = set()
    for r in results:
        recorded_class = numeric_class(r["environment"])
        if recorded_class in seen:
            continue
        seen.add(recorded_class)
        pair, objective, model = pair_key(recorded_class, here_class), r.identity.objective, r.identity.model
        recorded: dict[frozenset[int], float] = {frozenset(): float(r["dense_calibration_loss"])}
        for rr in results:
            if numeric_class(rr["environment"]) == recorded_class:
                recorded.update(_recorded_losses(rr))
        for s, loss in measured.items():
            if s in recorded and math.isfinite(recorded[s]) and math.isfinite(loss):
                out.append((pair, objective, model, len(s), recorded[s], loss))
    return out


def second_check(opinion: Any, result: Result, key: tuple[str, str, str], table: dict[str, Any], seed: int,
                 held: Collection[frozenset[int]], sample: Sample, evaluate: bool) -> CellCheck:
    """``result`` checked again, whole, in ``opinion``'s precision (:mod:`depthprune.verify.second`), against the
    bands of its recorded class against that one."""
    recorded_class, model = numeric_class(result["environment"]), result.identity.model
    scorer = opinion.scorer(key)  # opens the second session: its class is known after it

    def band_for(loss: float) -> Band | None:
        return lookup(table, recorded_class, opinion.here_class, key[1], model, loss)

    def score(sets: list[frozenset[int]]) -> list[float]:  # in prefix order, as the first opinion's
        scorer.prefetch(sets)
        return scorer.many(sets)

    check = check_cell(result, score, band_for, opinion.here_class, seed, held, None, sample)
    if evaluate and check.replay.status != REPLAY_FAILED:
        items, windows = ev.sample(result, seed, sample.item_change, sample.window_change)
        measured = ev.measure_here(opinion.session, result, items, windows)
        check.add_evaluation(ev.check_evaluation(
            result, measured, ev.lookup(table, recorded_class, opinion.here_class, model, result["removed"])))
    return check


#: how many checks each band faces over the archive (rule 4): sets per (pair, objective, model), and per
#: (pair, model) the evaluations and each dataset's windows
Checks = tuple[dict[tuple[str, str, str], int], dict[tuple[str, str], dict[str, Any]]]


def count_checks(population: Sequence[Result], replays: Sequence[Replay], held: Collection[frozenset[int]],
                 here_class: str, model_weights: str, seed: int, evaluate: bool, checks: Checks) -> None:
    """Add one condition's full-sample checks (every cell of ``population``, whatever the selection) to
    ``checks``: rule 4 sizes each band for them (:mod:`depthprune.verify.bands`)."""
    sets, evaluations = checks
    for r, rep in zip(population, replays):
        pair = pair_key(numeric_class(r["environment"]), here_class)
        key = (pair, r.identity.objective, r.identity.model)
        sets[key] = sets.get(key, 0) + len(_sets_to_check(r, rep, seed, held, FULL))
        if evaluate and r.get("evaluated") and (r.get("item_outcomes") or r.get("window_nll")) \
                and r.identity.weights == model_weights:
            row = evaluations.setdefault((pair, r.identity.model), {"evaluations": 0, "windows": {}})
            row["evaluations"] += 1
            for name, idx in ev.sample(r, seed, FULL.item_change, FULL.window_change)[1].items():
                row["windows"][name] = row["windows"].get(name, 0) + len(idx)


def remeasure(results: Sequence[Result], table: dict[str, Any], seed: int = 0, progress: bool = True,
              measure_bands: Callable[[list[Difference], list[EvalRow], Checks], dict[str, Any]]
              | None = None, population: Sequence[Result] | None = None, evaluate: bool = True,
              dtype: str = "auto", sample: Sample = FULL,
              on_check: Callable[[CellCheck], None] | None = None,
              second_opinion: bool = True) -> tuple[list[CellCheck], list[Difference]]:
    """Every cell of ``results`` checked on this machine; also the measuring sets' differences (for bands).

    ``measure_bands``: given a model's set differences, evaluation measurements (:data:`depthprune.verify.bands.EvalRow`) and the
    checks each band faces over the population (:func:`count_checks`), returns the table to check that
    model's cells with (``--measure-bands``: its bands measured first, then its cells checked).
    ``population``: every cell the measuring sets are drawn from (default ``results``; the CLI passes
    all cells of the selected grids). ``evaluate``: also re-evaluate each removed set (rule E2).
    ``dtype``: the precision re-measured in (``auto``: what the machine runs; ``bfloat16`` on a CPU without AMX
    measures bf16 on its own kernels against another machine's). ``sample``: how much of each cell is
    re-measured (:data:`FULL`, or :data:`CI`'s smaller rule); bands are measured on the same sets either way.
    ``on_check``: hears of each cell's check as soon as it is done (a long run shows, and keeps, what it has
    decided so far: the CLI prints it and rewrites ``--json``). ``second_opinion``: a cell that fails in
    another precision than its recorded one is checked again in the recorded one (:mod:`depthprune.verify.second`).
    """
    import time

    from tqdm.auto import tqdm

    from depthprune.env import environment
    from depthprune.recipe import Session
    from depthprune.verify.second import SecondOpinion, check_scorer, precision

    by_model: dict[str, dict[tuple[str, str, str], list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_model[r.identity.model][condition_key(r)].append(r)
    everyone: dict[tuple[str, str, str], dict[tuple[str, str], Result]] = defaultdict(dict)
    for r in [*results, *(population or ())]:  # the selected cells, then the rest of their population
        everyone[condition_key(r)].setdefault((str(r.identity.grid), r["cell"]), r)
    checks: list[CellCheck] = []
    differences: list[Difference] = []
    bar = tqdm(total=len(results), desc="verify", unit="cell", disable=not progress, leave=False)
    start = time.perf_counter()
    for model, conditions in sorted(by_model.items()):
        session = Session.open(model, device="cpu", dtype=dtype)
        seconds: dict[str, SecondOpinion] = {}  # recorded precision -> the model opened in it, on first need
        try:
            here_class = numeric_class(environment(session.device, session.dtype))
            prepared = {}
            model_differences: list[Difference] = []
            checks_faced: Checks = ({}, {})
            # rule 4 counts the checks of every condition of the model in the population, selected or not
            unselected = sorted(k for k in everyone if k[0] == model and k not in conditions)
            for key in unselected if measure_bands is not None else []:
                pool = list(everyone[key].values())
                pool_reps = [replay(r) for r in pool]
                count_checks(pool, pool_reps, set(held_out(pool, pool_reps, seed)), here_class, session.weights, seed,
                             evaluate, checks_faced)
            for key, cells in sorted(conditions.items()):
                pool = list(everyone[key].values())
                pool_replays = {(r.identity.grid, r["cell"]): replay(r) for r in pool}  # each cell replayed once
                replays = [pool_replays[r.identity.grid, r["cell"]] for r in cells]
                held = held_out(pool, list(pool_replays.values()), seed)
                if measure_bands is not None:  # the measuring sets: dense, singles (the prior), held-out
                    count_checks(pool, list(pool_replays.values()), set(held), here_class, session.weights, seed,
                                 evaluate, checks_faced)
                    calib = session.calibrate(key[1], **json.loads(key[2]))
                    scorer = calib.scorer.fork(known={frozenset([i]): p for i, p in enumerate(calib.prior)})
                    measured = {frozenset(): calib.dense_loss, **{frozenset([i]): p for i, p in enumerate(calib.prior)}}
                    scorer.prefetch(held, f"{model} {key[1]}: measuring sets" if progress else None)
                    measured.update(zip(held, scorer.many(held)))
                    # recorded losses of the measuring sets: from every cell of the condition they were drawn from
                    recorded_here = [r for r in pool if r.identity.weights == session.weights]
                    if recorded_here:
                        model_differences += band_differences(recorded_here, measured, here_class)
                checked = {s for r, rep in zip(cells, replays) if r.identity.weights == session.weights
                           for s in _sets_to_check(r, rep, seed, set(held), sample)}
                if measure_bands is None:  # no prior, no measuring set: a dense pass only where it pays
                    scorer = check_scorer(session, key, checked)
                prepared[key] = (scorer, replays, set(held), checked)
            differences += model_differences
            evaluated: dict[tuple[str, str], ev.Measured] = {}

            def measured_for(r: Result) -> ev.Measured:
                k = (canonical(sorted(r["removed"])), canonical(r["evaluation_protocol"]["config"]))
                if k not in evaluated:
                    items, windows = ev.sample(r, seed, sample.item_change, sample.window_change)
                    evaluated[k] = ev.measure_here(session, r, items, windows)
                return evaluated[k]

            def evaluable(r: Result) -> bool:
                return evaluate and bool(r.get("evaluated")) and bool(r.get("item_outcomes") or r.get("window_nll")) \
                    and r.identity.weights == session.weights

            if measure_bands is not None:
                eval_rows: list[EvalRow] = []
                seen: set[tuple[str, str]] = set()
                for r in (r for cells in conditions.values() for r in cells if evaluable(r)):
                    pair = pair_key(numeric_class(r["environment"]), here_class)
                    if (pair, str(sorted(r["removed"]))) in seen:
                        continue
                    seen.add((pair, str(sorted(r["removed"]))))
                    seen_here = ev.compare(r, measured_for(r))
                    eval_rows.append((pair, model, ev.fold(model, r["removed"]), seen_here.disagreements,
                                      seen_here.items, seen_here.relative))
                table = measure_bands(model_differences, eval_rows, checks_faced)
            for key, cells in sorted(conditions.items()):
                scorer, replays, held, checked = prepared[key]
                scorer.prefetch(checked, f"{model} {key[1]}: sets" if progress else None)  # in prefix order
                for r, rep in zip(cells, replays):
                    recorded_class = numeric_class(r["environment"])

                    def band_for(loss: float, rc: str = recorded_class, objective: str = key[1]) -> Band | None:
                        return lookup(table, rc, here_class, objective, model, loss)

                    if r.identity.weights != session.weights:
                        check = CellCheck(str(r.identity.grid), r["cell"], model, key[1], recorded_class, here_class,
                                          rep,
                                          status=NOT_VERIFIED, band=band_for(float(r["calibration_loss"])))
                        check.disagreement = (f"recorded on weights {r.identity.weights}; this machine's "
                                              f"{model} is {session.weights}")
                    else:
                        check = check_cell(r, scorer.many, band_for, here_class, seed, held, rep, sample)
                        if evaluable(r) and check.replay.status != REPLAY_FAILED:
                            check.add_evaluation(ev.check_evaluation(
                                r, measured_for(r), ev.lookup(table, recorded_class, here_class, model, r["removed"])))
                    want = precision(r["environment"])
                    if second_opinion and check.status == FAILED and check.replay.status != REPLAY_FAILED \
                            and want is not None and want != precision({"dtype": session.dtype}):
                        opinion = seconds.setdefault(want, SecondOpinion(model, want))
                        check.second = second_check(opinion, r, key, table, seed, held, sample, evaluable(r))
                        if check.second.status == VERIFIED:
                            check.status = BY_PRECISION
                    check.elapsed = time.perf_counter() - start
                    checks.append(check)
                    bar.update(1)
                    if on_check is not None:
                        on_check(check)
        finally:
            for opinion in seconds.values():
                opinion.close()
            session.close()
    bar.close()
    return checks, differences
