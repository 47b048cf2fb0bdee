"""The kind of every test file: the one table the root conftest marks tests from.

    pytest -m unit                      the inner loop: pure logic and tiny random models built in-process
    pytest -m "not integration"         everything but shipped models, real GGUFs, lm-eval end to end, the CLI on models
    pytest -m docs                      the documentation, README and guide checks

A kind is a marker (pyproject's [tool.pytest.ini_options] registers them). Markers select; nothing is
deselected by default, so ``pytest`` and CI run every test as before. A file's kind was measured (each file
alone, ``--durations=0``): a file that loads a shipped model, a real GGUF or lm-eval end to end, runs the CLI on
a model, or takes more than ~5 s a test, is ``integration``; a test of another kind than its file's is named
in EXCEPTIONS below (a test's own kind marker, ``@pytest.mark.integration``, wins over both). A test file
missing here fails collection with a message naming it and this table; a file listed here but absent (a branch
not merged yet) is no error.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path

KIND_MARKERS = ("unit", "integration", "docs", "grid", "benchmark", "property")

#: the order tests are handed to xdist's workers in (:func:`longest_kinds_first`): the kinds whose tests take
#: longest first, so that the many short unit tests fill the end and the two workers finish together. Collected
#: as they are, bench/ comes last: a .ci/run capped to AVX2 at e31af26 ended with one worker running three grid
#: cells (164 s) while the other had been idle for ~80 s (docs/measurements.md)
RUN_ORDER = ("grid", "integration", "property", "benchmark", "docs", "unit")

# path (from the repository root) -> kind
KINDS: dict[str, str] = {
    # tests/: the repository as a whole (top level, and the recipe), then a folder per room of the package
    "tests/test_ci_uv_settings.py": "unit",
    "tests/test_import_graph.py": "unit",
    "tests/test_kinds.py": "unit",
    "tests/test_module_size.py": "unit",
    "tests/test_recipe.py": "integration",
    "tests/cli/test_bad_input.py": "unit",
    "tests/cli/test_cli.py": "integration",
    "tests/cli/test_commands.py": "integration",
    "tests/model/test_architectures.py": "unit",
    "tests/healing/test_budget.py": "unit",
    "tests/healing/test_band.py": "unit",
    "tests/healing/test_config.py": "unit",
    "tests/report/test_claims_healing.py": "unit",
    "tests/experiments/test_healing_curve.py": "unit",
    "tests/healing/test_lora.py": "unit",
    "tests/healing/test_pruned.py": "integration",
    "tests/healing/test_reference.py": "integration",
    "tests/healing/test_grid_heals.py": "integration",
    "tests/cli/test_heal.py": "integration",
    "tests/scoring/test_request_cost.py": "unit",
    "tests/data/test_sources.py": "unit",
    "tests/data/test_healing_text.py": "unit",
    "tests/common/test_machine.py": "unit",
    "tests/results/test_provenance.py": "unit",
    "tests/evaluation/test_evaluate.py": "unit",
    "tests/model/test_gguf.py": "integration",
    "tests/common/test_jsonio.py": "unit",
    "tests/model/test_kernel_identity.py": "integration",
    "tests/evaluation/test_lm_adapter.py": "integration",
    "tests/evaluation/test_templates.py": "unit",
    "tests/evaluation/test_env_report.py": "unit",
    "tests/evaluation/test_replacing.py": "unit",
    "tests/model/test_masking.py": "unit",
    "tests/model/test_output_head.py": "unit",
    "tests/model/test_loading.py": "unit",
    "tests/common/test_params.py": "unit",
    "tests/model/test_precision.py": "integration",
    "tests/common/test_plugins.py": "unit",
    "tests/results/test_schema.py": "unit",
    "tests/scoring/test_score_store.py": "integration",
    "tests/scoring/test_scorer.py": "unit",
    "tests/scoring/test_state_cache.py": "unit",
    "tests/builders/test_task_baselines.py": "unit",
    "tests/common/test_text_tables.py": "unit",
    "tests/results/test_archive.py": "unit",
    "tests/grid/test_cases.py": "unit",
    "tests/grid/test_cluster.py": "integration",
    "tests/verify/test_forks.py": "unit",
    "tests/grid/test_reference.py": "unit",
    "tests/verify/test_rivals.py": "unit",
    "tests/grid/test_schedule.py": "unit",
    "tests/grid/test_stand_in_results.py": "unit",
    "tests/grid/test_time_split.py": "unit",
    "tests/objectives/test_objectives.py": "unit",
    "tests/plan/test_device_check.py": "integration",
    "tests/plan/test_plan.py": "unit",
    "tests/experiments/test_calibration_curve.py": "unit",
    "tests/real/test_gemma3.py": "integration",
    "tests/real/test_gguf_checkpoint.py": "integration",
    "tests/real/test_power_rule.py": "unit",
    "tests/cards/test_real_cards.py": "unit",
    "tests/builders/test_debian.py": "unit",
    "tests/builders/test_python_docs.py": "unit",
    "tests/builders/test_healing_text.py": "unit",
    "tests/real/test_real_grid.py": "unit",
    "tests/real/test_real_model.py": "integration",
    "tests/real/test_verify_sample.py": "integration",
    "tests/builders/test_wordnet_tasks.py": "unit",
    "tests/rehearsal/test_rehearsal.py": "integration",
    "tests/rehearsal/test_ci_slice.py": "grid",
    "tests/report/test_baselines.py": "unit",
    "tests/report/test_claims.py": "unit",
    "tests/report/test_claims_cost.py": "unit",
    "tests/report/test_claims_noise.py": "unit",
    "tests/report/test_controls_report.py": "unit",
    "tests/report/test_firmness.py": "unit",
    "tests/report/test_healing.py": "unit",
    "tests/report/test_layout.py": "unit",
    "tests/report/test_precision_report.py": "unit",
    "tests/report/test_real_section.py": "unit",
    "tests/report/test_report.py": "integration",
    "tests/search/test_prior_steering.py": "unit",
    "tests/search/test_searchers.py": "unit",
    "tests/speed/test_speed.py": "integration",
    "tests/tiny/test_tiny_family.py": "integration",
    "tests/verify/test_evaluation.py": "integration",
    "tests/verify/test_findings.py": "unit",
    "tests/verify/test_remeasure.py": "integration",
    "tests/verify/test_replay.py": "integration",
    "tests/verify/test_second_opinion.py": "integration",
    "tests/verify/test_verify_cli.py": "integration",
    # tests/: documentation, README, guides and CI files
    "tests/docs/test_docs.py": "docs",
    "tests/docs/test_pages.py": "docs",
    "tests/docs/test_readme.py": "docs",
    "tests/docs/test_workflows.py": "docs",
    # bench/: grid cells (run, rehearsed on stand-ins, replayed), searcher properties, speed benchmarks
    "bench/test_grid.py": "grid",
    "bench/test_rehearsal.py": "grid",
    "bench/test_verify.py": "grid",
    "bench/test_searcher_properties.py": "property",
    "bench/test_bench_dtype.py": "benchmark",
    "bench/test_bench_head.py": "benchmark",
    "bench/test_bench_healing.py": "benchmark",
    "bench/test_bench_lm_adapter.py": "benchmark",
    "bench/test_bench_score_store.py": "benchmark",
    "bench/test_bench_spares.py": "benchmark",
    "bench/test_bench_scoring.py": "benchmark",
    "bench/test_bench_speed.py": "benchmark",
}

# Tests of another kind than their file's, by test id (the function's name with its parameters, fnmatch; "[" is
# written "[[]"): a unit file's tests that load a shipped model or run lm-eval end to end, and those that took
# >= 5 s in the measured `pytest -m unit -n 2` run (DESIGN.md, "Tests"). tests/test_kinds.py checks that each names
# a test of its file.
EXCEPTIONS: dict[str, dict[str, str]] = {
    # tiny-llama3
    "tests/scoring/test_request_cost.py": {"test_recipe_charges_the_prior_only_to_searchers_that_use_it": "integration"},
    "tests/common/test_machine.py": {"test_release_free_memory_hands_freed_heap_pages_back": "integration"},
    "tests/evaluation/test_evaluate.py": {"test_view_equals_pruned_copy_and_is_cached": "integration"},  # lm-eval end to end
    "tests/model/test_masking.py": {"test_saved_pruned_checkpoint_reloads_with_identical_logits[[]*": "integration",
                                   "test_view_is_reversible_and_matches_independent_rebuild[[]*": "integration"},
    "tests/scoring/test_scorer.py": {"test_cached_scores_equal_full_forward[[]*": "integration",
                                   "test_greedy_same_answer_about_half_the_layer_forwards": "integration",
                                   "test_cache_respects_byte_budget": "integration"},
    # both read the module's rebuild (11-20 s of one test's setup)
    # both read the module's rebuild (11-20 s of the first one's setup)
    "tests/builders/test_task_baselines.py": {"test_the_frozen_file_is_what_a_rebuild_gives": "integration",
                                          "test_check_fails_on_a_stale_file_and_build_writes_a_fresh_one":
                                          "integration"},
    "tests/results/test_archive.py": {"test_committed_report_is_what_the_committed_archives_give": "integration"},
    "tests/objectives/test_objectives.py": {
        "test_margin_matches_unbatched_reference[[]removed1-*-option]": "integration",
        "test_margin_matches_unbatched_reference[[]removed0-one-sequence-per-option-label]": "integration",
        "test_kl_is_zero_dense_and_matches_reference": "integration"},
    "tests/plan/test_plan.py": {"test_planner_counts_what_a_private_scorer_runs[[]*": "integration",  # tiny-llama3
                                "test_check_result_recounts_a_grid_result[[]*": "integration",
                                "test_shape_formula_counts_a_real_model": "integration",
                                "test_plan_of_the_paper_grid_adds_up": "integration",
                                "test_bo_bounds_hold": "integration"},
    "tests/report/test_claims_noise.py": {
        "test_5_2_is_rarely_held_on_noise_only_grids[[]*": "integration",
        "test_5_3_is_rarely_held_on_grids_where_accuracy_and_perplexity_are_unrelated[[]*": "integration"},
    "tests/search/test_prior_steering.py": {"*[[]bo[]]": "integration"},
    "tests/search/test_searchers.py": {
        "*[[]bo[]]": "integration",
        "test_bo_acquisition_picks_better_than_a_random_pick_from_its_pool": "integration",
        "test_cbo_milp_matches_enumeration_and_brute_force": "integration"},
}

TABLE = "tests/kinds.py (KINDS)"


def unlisted(path: Path, root: Path, patterns: list[str]) -> str | None:
    """Why test file ``path`` cannot be collected: the table gives it no kind (None if it does, if it is no test
    file by pytest's ``python_files`` patterns, or if it lies outside ``root``: not ours)."""
    if not any(fnmatchcase(path.name, p) for p in patterns):
        return None
    try:
        rel = path.resolve().relative_to(root).as_posix()
    except ValueError:
        return None
    if rel in KINDS:
        return None
    return (f"{rel}: no kind in {TABLE}; add the file with one of {', '.join(KIND_MARKERS)} (measure it alone "
            "with --durations=0: a shipped model, a real GGUF, lm-eval end to end, the CLI on models or > ~5 s a "
            "test is integration)")


def kind_of(path: str, test_id: str) -> str | None:
    """The kind of test ``test_id`` (its name with parameters) in file ``path`` (from the root): its entry in
    EXCEPTIONS, else its file's in KINDS (None for a file the table does not list)."""
    for pattern, kind in EXCEPTIONS.get(path, {}).items():
        if fnmatchcase(test_id, pattern):
            return kind
    return KINDS.get(path)


def mark_kinds(items, root: Path) -> None:
    """Give every collected test its kind as a marker, unless it carries a kind marker of its own
    (``@pytest.mark.integration``). A file the table does not list is left unmarked: collecting it failed
    already (``unlisted``)."""
    import pytest

    for item in items:
        try:
            path = Path(item.path).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        kind = kind_of(path, item.name)
        if kind is not None and not any(item.get_closest_marker(k) for k in KIND_MARKERS):
            item.add_marker(getattr(pytest.mark, kind))


def longest_kinds_first(items) -> None:
    """Order ``items`` by kind as :data:`RUN_ORDER` says, in place; stable, so the order within a kind is kept
    (bench/conftest.py's longest grid groups first, then collection order). A test of no kind goes last."""
    def rank(item) -> int:
        return next((i for i, kind in enumerate(RUN_ORDER) if item.get_closest_marker(kind)), len(RUN_ORDER))

    items.sort(key=rank)
