"""A grid's heals: each distinct removed set of its results healed once, with controls, journaled.

Per model of the grid's (unhealed) results: every distinct removed set, the dense model (the control a healed
pruned model is compared with), and, on a second healing seed, every ``second_every``-th distinct set and the
dense model again (the seed spread every healing claim's MDE takes in). Each job evaluates the set unhealed and
healed, both in float32 (the archived unhealed results may be bf16: a before/after pair must differ by the heal
alone), with the grid's own evaluation, and writes one journal file, atomically, when both are done: a run
stopped, even by kill -9, resumes with the jobs left. From the journal, every unhealed result of the set gets
its healed result (``<grid>-healed/<cell>@<heal>.json``) and the dense model its healed dense file, so
``depthprune archive`` packs them as ``archive/<grid>-healed.jsonl.xz`` and a clean clone re-judges them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import JSONFileError, read_json, write_json_atomic
from depthprune.data.healing_text import healing_fingerprint, healing_texts
from depthprune.data.protocol import EvalConfig
from depthprune.evaluation.evaluate import EvalResult
from depthprune.healing.config import HealConfig
from depthprune.healing.pruned import evaluate_healed, evaluate_unhealed, heal_removed, healed_result
from depthprune.recipe import Session
from depthprune.results.schema import Result

HEALED_SUFFIX = "-healed"
JOURNAL = "heals"
#: the searchers whose sets a grid heals by default: the paper's seven (the rank panel's sets are optional)
PAPER_SEARCHERS = ("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")


@dataclass(frozen=True)
class HealJob:
    """One heal of a grid: a model without ``removed`` (empty: the dense control), on ``seed``."""

    model: str
    removed: tuple[int, ...]
    seed: int

    @property
    def key(self) -> str:
        return f"{self.model}-{'_'.join(map(str, self.removed)) or 'dense'}-s{self.seed}"


def distinct_sets(results: Iterable[Result]) -> dict[str, dict[tuple[int, ...], list[Result]]]:
    """model -> removed set -> the results that removed it (a set found by several searchers is healed once)."""
    out: dict[str, dict[tuple[int, ...], list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        out[r.identity.model][tuple(sorted(r["removed"]))].append(r)
    return {m: dict(sorted(s.items())) for m, s in sorted(out.items())}


def plan_jobs(sets: Mapping[str, Mapping[tuple[int, ...], Any]], seed: int = 0, second_seed: int | None = 1,
              second_every: int = 4) -> list[HealJob]:
    """The jobs, model by model: each set and the dense control on ``seed``; on ``second_seed`` the dense
    control and every ``second_every``-th set in sorted order (a subset fixed by the sets alone)."""
    jobs = []
    for model, by_set in sets.items():
        jobs += [HealJob(model, s, seed) for s in by_set] + [HealJob(model, (), seed)]
        if second_seed is not None:
            jobs += [HealJob(model, s, second_seed) for s in list(by_set)[::second_every]]
            jobs.append(HealJob(model, (), second_seed))
    return jobs


def _evaluation_record(e: EvalResult) -> dict[str, Any]:
    return {"metrics": e.metrics, "item_outcomes": e.items, "item_clusters": e.clusters, "window_nll": e.windows,
            "evaluation_protocol": e.protocol, "seconds": e.seconds}


def journal_path(out: Path, job: HealJob, cfg: HealConfig) -> Path:
    return out / JOURNAL / f"{job.key}@{cfg.tag}.json"


def read_journal(path: Path) -> dict[str, Any] | None:
    """A finished job's record, or None (absent, or left half-written by a killed run: done again)."""
    try:
        data = read_json(path)
    except (FileNotFoundError, JSONFileError):
        return None
    return data if isinstance(data, dict) and data.get("finished") else None


def eval_config_of(result: Mapping[str, Any]) -> EvalConfig:
    """The evaluation a result was made with (its settings), to evaluate its heal the same way."""
    cfg = dict(result["settings"]["evaluation"])
    for key in ("tasks", "perplexity"):
        if key in cfg and cfg[key] is not None:
            cfg[key] = tuple(cfg[key])
    return EvalConfig(**cfg)


def run_job(session: Session, job: HealJob, cfg: HealConfig, eval_cfg: EvalConfig, texts: Sequence[str],
            data: Mapping[str, Any], progress: bool, before: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Heal one job and evaluate it before and after, in float32; the journal record. ``before``: the set's
    evaluation before healing as another seed's job of it recorded it (the same float32 evaluation of the same
    unhealed model on this session), so a second seed does not evaluate it again."""
    before_record = (dict(before) if before is not None
                     else _evaluation_record(evaluate_unhealed(session, job.removed, eval_cfg)))
    job_cfg = replace(cfg, seed=job.seed)
    model, report = heal_removed(session, job.removed, job_cfg, texts, data, progress=f"heal {job.key}" if progress
                                 else False)
    after = evaluate_healed(session, model, report, eval_cfg)
    del model
    return {"job": asdict(job), "model": session.spec.id, "weights": session.weights, "heal": job_cfg.tag,
            "healing": report.to_dict(), "healing_data": dict(data), "before_float32": before_record,
            "after": _evaluation_record(after), "finished": True}


def write_healed(out: Path, record: Mapping[str, Any], unhealed: Sequence[Result], dense: Mapping[str, Any] | None,
                 device: str) -> list[Path]:
    """The healed results of ``unhealed`` (or the healed dense file) from a job's journal record."""
    from depthprune.healing.lora import HealReport

    h = record["healing"]
    report = HealReport(h["config"], h["targets"], h["trainable_parameters"], h["steps"], h["tokens"], h["losses"],
                        h["seconds"], h["merge_max_abs_diff"], h["merge_max_abs_logit"], h["windows"])
    after = record["after"]
    evaluation = EvalResult(after["metrics"], after["evaluation_protocol"], after["seconds"],
                            items=after["item_outcomes"], clusters=after["item_clusters"], windows=after["window_nll"])
    written = []
    if not record["job"]["removed"]:
        base = dict(dense or {"model": record["model"], "weights": record["weights"]})
        path = out / "dense" / f"{record['model']}@{record['heal']}.json"
        write_json_atomic(path, {**base, "heal": record["heal"], "metrics": after["metrics"],
                                 "item_outcomes": after["item_outcomes"], "item_clusters": after["item_clusters"],
                                 "window_nll": after["window_nll"], "healing": h,
                                 "before_float32": record["before_float32"]})
        return [path]
    for r in unhealed:
        healed = healed_result(r, report, evaluation, eval_config_of(r), device)
        healed["healing"]["before_float32"] = record["before_float32"]
        path = out / f"{r.cell}@{record['heal']}.json"
        write_json_atomic(path, healed)
        written.append(path)
    return written


def heal_grid(results: Sequence[Result], dense: Mapping[str, Mapping[str, Any]], grid: str, cfg: HealConfig,
              results_dir: str | Path, models: Sequence[str] | None = None, second_seed: int | None = 1,
              second_every: int = 4, device: str = "cpu", progress: bool = True,
              searchers: Sequence[str] | None = PAPER_SEARCHERS) -> dict[str, Any]:
    """Every job of ``grid``'s ``results`` (of ``searchers``; None: every searcher's) not yet in the journal,
    model by model; returns what was done."""
    from tqdm.auto import tqdm

    rows = [r for r in results if r.identity.grid == grid and r["evaluated"]
            and (models is None or r.identity.model in models)
            and (searchers is None or r.identity.search in searchers)]
    if not rows:
        raise ValueError(f"no evaluated results of grid {grid!r}" + (f" for {', '.join(models)}" if models else ""))
    sets = distinct_sets(rows)
    jobs = plan_jobs(sets, cfg.seed, second_seed, second_every)
    out = Path(results_dir) / f"{grid}{HEALED_SUFFIX}"
    todo = [j for j in jobs if read_journal(journal_path(out, j, replace(cfg, seed=j.seed))) is None]
    done: dict[str, Any] = {"jobs": len(jobs), "run": 0, "resumed": len(jobs) - len(todo), "written": 0}
    bar = tqdm(total=len(jobs), initial=len(jobs) - len(todo), desc=f"heal {grid}", unit="heal", disable=not progress)
    for model in sets:
        mine = [j for j in todo if j.model == model]
        first = next(iter(sets[model].values()))[0]
        profile = first.identity.profile
        texts, data = healing_texts(profile), healing_fingerprint(profile)
        session = Session.open(model, profile=profile, device=device, dtype="float32") if mine else None
        if session is not None and session.weights != first.identity.weights:
            raise ValueError(f"{model}: the loaded weights {session.weights} are not the results' "
                             f"{first.identity.weights}: a heal must start from the model that was pruned")
        befores: dict[tuple[int, ...], Mapping[str, Any]] = {}  # each set's evaluation before healing, once
        for job in [j for j in jobs if j.model == model]:
            path = journal_path(out, job, replace(cfg, seed=job.seed))
            record = read_journal(path)
            if record is None:
                assert session is not None
                record = run_job(session, job, cfg, eval_config_of(first), texts, data, progress,
                                 before=befores.get(job.removed))
                write_json_atomic(path, record)
                done["run"] += 1
                bar.update(1)
            befores.setdefault(job.removed, record["before_float32"])
            unhealed = sets[model].get(job.removed, [])
            done["written"] += len(write_healed(out, record, unhealed, dense.get(model), device))
        if session is not None:
            session.close()
    bar.close()
    return done
