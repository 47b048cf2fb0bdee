"""Case files: the shipped grids load; bad files fail naming file, field and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.grid.cases import CaseFileError, apply_override, load_grid, load_grids

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
[grid]
name = "t"
models = ["tiny-llama3"]
objectives = ["ppl", "margin"]
searchers = ["oneshot", "greedy"]
budgets = [3, 5]
markers = ["tiny"]
[objective.ppl]
n_samples = 8
[searcher.greedy]
max_evaluations = 50
[evaluation]
seq_len = 64
[ci]
cells = ["tiny-llama3-ppl-greedy-M3"]
"""


def _write(tmp_path, text, name="g.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_shipped_grids_load():
    grids = {g.name: g for g in load_grids(ROOT / "cases")}
    paper = grids["paper"]
    assert len(paper.cells()) == 84
    assert paper.cells()[0].id == "llama3-8b-ppl-oneshot-M7"
    assert {"gpu", "slow"} <= set(paper.markers)


def test_good_file_and_cell_ids(tmp_path):
    grid = load_grid(_write(tmp_path, GOOD))
    ids = [c.id for c in grid.cells()]
    assert len(ids) == 8 and "tiny-llama3-margin-oneshot-M5" in ids
    assert grid.ci_cells == ("tiny-llama3-ppl-greedy-M3",)
    assert grid.objective_params == {"ppl": {"n_samples": 8}}
    assert grid.eval_config("tiny").seq_len == 64


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('searchers = ["oneshot", "greedy"]', 'searchers = ["oneshot", "gredy"]',
         r"\[grid\] searchers: 'gredy' is not allowed; allowed: .*greedy"),
        ('models = ["tiny-llama3"]', 'models = ["llama4"]', r"\[grid\] models: 'llama4' is not allowed"),
        ("budgets = [3, 5]", "budgets = [3, -1]", r"\[grid\] budgets: -1 is not allowed"),
        ("budgets = [3, 5]", 'budgets = "3"', r"\[grid\] budgets: must be a list"),
        ('markers = ["tiny"]', 'markers = ["huge"]', r"\[grid\] markers: 'huge' is not allowed; allowed: gpu, slow, tiny"),
        ("n_samples = 8", "n_sample = 8", r"\[objective.ppl\] n_sample: unknown parameter; allowed: .*n_samples"),
        ("max_evaluations = 50", "beam_width = 2", r"\[searcher.greedy\] beam_width: unknown parameter"),
        ("seq_len = 64", "seqlen = 64", r"\[evaluation\] seqlen: unknown parameter"),
        ('cells = ["tiny-llama3-ppl-greedy-M3"]', 'cells = ["tiny-llama3-ppl-greedy-M4"]',
         r"\[ci\] cells: 'tiny-llama3-ppl-greedy-M4' is not a cell"),
        ("[grid]", "[grids]", r"\[grids\]: unknown section"),
        ('name = "t"', "", r"\[grid\] name: required"),
    ],
)
def test_bad_files_say_where_and_what(tmp_path, old, new, message):
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(CaseFileError, match=message) as err:
        load_grid(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("table, message", [
    ("[heal]\nrank = 8", r"\[heal\] tokens: required"),
    ("[heal]\ntokens = 4096\nrank = 0", r"\[heal\]: healing: rank must be an integer >= 1, got 0"),
    ("[heal]\ntokens = 4096\nepochs = 2", r"\[heal\] epochs: unknown parameter; allowed: .*tokens"),
])
def test_a_heal_table_is_checked_where_it_is_written(tmp_path, table, message):
    path = _write(tmp_path, GOOD + table + "\n")
    with pytest.raises(CaseFileError, match=message) as err:
        load_grid(path)
    assert str(path) in str(err.value)
    assert load_grid(_write(tmp_path, GOOD + "[heal]\ntokens = 4096\nrank = 16\n", "ok.toml")).heal == {
        "tokens": 4096, "rank": 16}


def test_budget_must_fit_the_model(tmp_path):
    text = GOOD.replace('models = ["tiny-llama3"]', 'models = ["llama3-8b"]').replace("[3, 5]", "[7, 32]")
    text = text.replace('cells = ["tiny-llama3-ppl-greedy-M3"]', "")
    with pytest.raises(CaseFileError, match="32 is not allowed for llama3-8b"):
        load_grid(_write(tmp_path, text))


def test_not_toml_and_duplicate_names(tmp_path):
    with pytest.raises(CaseFileError, match="not valid TOML"):
        load_grid(_write(tmp_path, "[grid\nname="))
    d = tmp_path / "two"
    d.mkdir()
    _write(d, GOOD, "a.toml")
    _write(d, GOOD, "b.toml")
    with pytest.raises(CaseFileError, match="already used"):
        load_grids(d)


BLOCKS = GOOD.replace('name = "t"', 'name = "t"\nkind = "controls"\ncompare_with = "tiny"') + """
[[cells]]
searchers = ["ga"]
variant = "uniform"
search_params = { prior = "uniform" }
budgets = [3]

[[cells]]
objectives = ["ppl"]
searchers = ["oneshot"]
variant = "csdata"
objective_params = { dataset = "commonsense170k", packing = "joined" }

[[cells]]
searchers = ["oneshot", "ga"]
budgets = [3]
calibration_seeds = [1, 2]
"""


def test_cell_blocks_add_variants_and_calibration_seeds(tmp_path):
    from depthprune.grid.runner import objective_params

    grid = load_grid(_write(tmp_path, BLOCKS))
    assert grid.kind == "controls" and grid.compare_with == "tiny"
    cells = {c.id: c for c in grid.cells()}
    assert len(cells) == 8 + 2 + 2 + 8  # axes, uniform ga, csdata oneshot, seeds (2 objectives x 2 searchers x 2)
    ga = cells["tiny-llama3-margin-ga.uniform-M3"]
    assert grid.search_params(ga) == {"prior": "uniform"} and ga.group == "tiny-llama3/margin"
    cs = cells["tiny-llama3-ppl-oneshot.csdata-M5"]
    assert objective_params(grid, cs) == {"n_samples": 8, "dataset": "commonsense170k", "packing": "joined"}
    assert cs.group == "tiny-llama3/ppl.csdata"  # its own calibration, so its own group
    # a stochastic searcher's seed follows the calibration seed; a deterministic one's does not
    assert "tiny-llama3-ppl-ga-M3-s2-c2" in cells and "tiny-llama3-ppl-oneshot-M3-c2" in cells
    assert objective_params(grid, cells["tiny-llama3-ppl-oneshot-M3-c2"])["seed"] == 2


@pytest.mark.parametrize("old, new, message", [
    ('variant = "uniform"', 'variant = "default"', "needs a name"),
    ('prior = "uniform"', 'prior_kind = "uniform"', "prior_kind"),
    ('packing = "joined"', 'packingg = "joined"', "packingg"),
    ('calibration_seeds = [1, 2]', 'calibration_seeds = [-1]', "calibration_seeds"),
    ('searchers = ["ga"]', 'searchers = ["gaa"]', "'gaa' is not allowed"),
    ('budgets = [3]\n\n[[cells]]\nobjectives', 'budget = [3]\n\n[[cells]]\nobjectives', "budget"),
    ('kind = "controls"', 'kind = "ablation"', "kind"),
    ('compare_with = "tiny"', '', "compare_with"),
])
def test_bad_cell_blocks_say_where_and_what(tmp_path, old, new, message):
    assert old in BLOCKS
    with pytest.raises(CaseFileError, match=message) as err:
        load_grid(_write(tmp_path, BLOCKS.replace(old, new, 1)))
    assert str(tmp_path) in str(err.value)


PANEL = GOOD + """
[[cells]]
searchers = ["rank"]
budgets = [3]
variants = { r01 = { q = 0.04 }, r02 = { q = 0.08 } }
"""


def test_one_block_may_name_several_variants(tmp_path):
    grid = load_grid(_write(tmp_path, PANEL))
    cells = {c.id: c for c in grid.cells() if c.search == "rank"}
    assert sorted(cells) == ["tiny-llama3-margin-rank.r01-M3", "tiny-llama3-margin-rank.r02-M3",
                             "tiny-llama3-ppl-rank.r01-M3", "tiny-llama3-ppl-rank.r02-M3"]
    assert grid.search_params(cells["tiny-llama3-ppl-rank.r02-M3"])["q"] == 0.08
    assert cells["tiny-llama3-ppl-rank.r02-M3"].group == "tiny-llama3/ppl"  # shares exhaustive's memo


def test_a_named_group_spans_objectives_and_a_lane_does_not(tmp_path):
    """``group`` fixes which cells share a worker by hand (across objectives); ``lane`` splits a block off
    within its model and objective; a block may give one of the two, a group name goes into the group id."""
    grid = load_grid(_write(tmp_path, PANEL.replace("budgets = [3]\nvariants", 'budgets = [3]\ngroup = "b"\nvariants')))
    groups = {c.id: c.group for c in grid.cells()}
    assert groups["tiny-llama3-ppl-rank.r01-M3"] == groups["tiny-llama3-margin-rank.r02-M3"] == "tiny-llama3/b"
    assert groups["tiny-llama3-ppl-greedy-M3"] == "tiny-llama3/ppl"
    lanes = load_grid(_write(tmp_path, PANEL.replace("budgets = [3]\nvariants", 'budgets = [3]\nlane = "b"\nvariants')))
    assert {c.group for c in lanes.cells() if c.search == "rank"} == {"tiny-llama3/ppl/b", "tiny-llama3/margin/b"}
    for bad, message in (('group = "b"\nlane = "b"', "not both"), ('group = "a/b"', "letters, digits")):
        with pytest.raises(CaseFileError, match=message) as err:
            load_grid(_write(tmp_path, PANEL.replace("budgets = [3]\nvariants", f"budgets = [3]\n{bad}\nvariants")))
        assert "[[cells]] #1 group" in str(err.value)


@pytest.mark.parametrize("old, new, message", [
    ("variants = {", 'variant = "x"\nvariants = {', "not both"),
    ("r01 = { q = 0.04 }", "default = { q = 0.04 }", "needs a name"),
    ("r01 = { q = 0.04 }", "r01 = { qq = 0.04 }", "qq"),
    ("r01 = { q = 0.04 }", "r01 = 0.04", "must be a table"),
])
def test_bad_variants_say_where_and_what(tmp_path, old, new, message):
    assert old in PANEL
    with pytest.raises(CaseFileError, match=message) as err:
        load_grid(_write(tmp_path, PANEL.replace(old, new, 1)))
    assert str(tmp_path) in str(err.value) and "variants" in str(err.value)


def test_a_block_that_repeats_a_cell_is_refused(tmp_path):
    text = GOOD + '\n[[cells]]\nsearchers = ["oneshot"]\n'
    with pytest.raises(CaseFileError, match="defined twice"):
        load_grid(_write(tmp_path, text))

def test_rehearsal_overrides_change_sizes_not_cells():
    paper = load_grid(ROOT / "cases" / "paper.toml")
    for name in ("ci.toml", "full-shape.toml"):
        grid = apply_override(paper, ROOT / "cases" / "rehearsal" / name)
        assert [c.id for c in grid.cells()] == [c.id for c in paper.cells()]
        assert grid.device == "cpu" and grid.dtype == paper.dtype == "bfloat16" and grid.batch_size == 8
        assert grid.searchers == paper.searchers and grid.budgets == paper.budgets
        assert set(grid.ci_cells) <= {c.id for c in grid.cells()} and grid.ci_cells
        assert grid.override == ROOT / "cases" / "rehearsal" / name
    full = apply_override(paper, ROOT / "cases" / "rehearsal" / "full-shape.toml")
    assert full.objective_params == paper.objective_params, "full shape: the paper's calibration sizes"
    assert full.evaluation == paper.evaluation, "full shape: the paper's evaluation, batch included"


@pytest.mark.parametrize("text, match", [
    ('[override]\ngrid = "tiny"\n', "must name the grid it overrides"),
    ('[override]\ngrid = "paper"\n[grid]\nmodels = ["tiny-llama3"]\n', "may not change it"),
    ('[override]\ngrid = "paper"\n[objective.ppl]\nn_sample = 2\n', "unknown parameter"),
    ('[override]\ngrid = "paper"\n[ci]\ncells = ["nope-M7"]\n', "is not a cell of this grid"),
    ('[override]\ngrid = "paper"\n[bogus]\nx = 1\n', "unknown section"),
])
def test_bad_overrides_are_refused_by_name(tmp_path, text, match):
    path = tmp_path / "o.toml"
    path.write_text(text)
    with pytest.raises(CaseFileError, match=match):
        apply_override(load_grid(ROOT / "cases" / "paper.toml"), path)


def test_the_tiny_ci_slice_covers_every_searcher_objective_budget_and_two_architectures():
    """What tiny.toml's [ci] comment promises, so that a cheaper pick cannot drop a searcher."""
    import json

    from depthprune.model import MODELS

    grid = load_grid(ROOT / "cases" / "tiny.toml")
    cells = {c.id: c for c in grid.cells()}
    picked = [cells[i] for i in grid.ci_cells]
    assert sorted(c.search for c in picked) == sorted(grid.searchers), "each searcher once"
    assert {c.objective for c in picked} == set(grid.objectives)
    assert {c.budget for c in picked} == set(grid.budgets)

    def architecture(model: str) -> str:
        return json.loads((Path(MODELS[model].source) / "config.json").read_text())["architectures"][0]

    assert len({architecture(c.model) for c in picked}) >= 2
    assert {(architecture(c.model), c.objective) for c in picked} == \
        {(architecture(c.model), o) for c in picked for o in grid.objectives}, "both objectives on each architecture"
