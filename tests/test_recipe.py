"""The recipe, the pruning core (depthprune.recipe): one shipped tiny model through Session -> Calibration ->
search -> result -> pruned checkpoint, the path the CLI and every grid cell take."""

from __future__ import annotations

import pytest
import torch

from depthprune.recipe import Session, check_budget, identity, make_result, save_pruned
from depthprune.results.schema import validate

MODEL = "tiny-llama3"
#: a small ppl calibration (the profile's is 32 windows of 128 tokens): what these tests check holds at any size, and
#: greedy's two searches below then take ~3 s instead of ~20 s of a worker
SMALL = {"n_samples": 8, "seq_len": 64}

# One worker for the module: its session's ppl calibration (dense pass and prior) is then built once, for every test
# that calibrates, not once per xdist worker and again by a test with a session of its own.
pytestmark = pytest.mark.xdist_group("recipe-session")


@pytest.fixture(scope="module")
def session():
    torch.manual_seed(0)
    s = Session.open(MODEL, device="cpu", dtype="float32")
    yield s
    s.close()


def test_a_budget_out_of_range_names_the_model_and_what_is_allowed(session):
    check_budget(session.spec, session.n_layers, session.n_layers - 1)
    with pytest.raises(ValueError, match=rf"{MODEL} has {session.n_layers} layers \(2 protected\); allowed 0\.\."):
        check_budget(session.spec, session.n_layers, session.n_layers - 2, protected=(0, 1))


def test_a_search_is_the_same_for_a_seed_whichever_memo_it_starts_from(session):
    calib = session.calibrate("ppl", **SMALL)
    first = calib.search("greedy", 2, seed=3)
    again = calib.search("greedy", 2, seed=3, share_memo=False)
    assert first.removed == again.removed and first.result.loss == again.result.loss
    assert len(first.removed) == 2 and first.result.loss >= calib.dense_loss - 1e-6
    assert first.cost["evaluations"] == again.cost["evaluations"]  # counted as if each ran alone


def test_the_result_is_the_schema_and_its_fingerprint_follows_its_settings(session):
    calib = session.calibrate("ppl", **SMALL)
    outcome = calib.search("oneshot", 2)
    result = make_result(session, calib, outcome, identity(session, calib, "oneshot", 2, 0))
    checked = validate(result, "recipe")
    assert list(checked["removed"]) == sorted(outcome.removed)
    other = make_result(session, calib, outcome, identity(session, calib, "oneshot", 2, 1))
    assert other["fingerprint"] != result["fingerprint"]  # the seed is part of the identity


def test_the_pruned_checkpoint_loads_with_its_blocks_removed(session, tmp_path):
    from transformers import AutoModelForCausalLM

    s = session
    calib = s.calibrate("ppl", **SMALL)
    outcome = calib.search("oneshot", 2)
    result = make_result(s, calib, outcome, identity(s, calib, "oneshot", 2, 0))
    n = s.n_layers
    out = save_pruned(s, result, tmp_path / "pruned")
    loaded = AutoModelForCausalLM.from_pretrained(out)
    assert loaded.config.num_hidden_layers == n - 2
    ids = torch.tensor([[1, 5, 9, 13, 17]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, s.model(ids).logits, atol=1e-5)
