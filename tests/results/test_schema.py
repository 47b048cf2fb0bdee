"""depthprune.results.schema.Result: the stored form, read-only, with one way to read the identity."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from depthprune.results.schema import SCHEMA, Condition, Identity, Result, ResultError, check_result, to_json, validate
from depthprune.results.store import read_result, write_result


def stored(**over) -> dict:
    ident = Identity(grid="g", model="m", weights="sha256:w", profile="tiny", objective="ppl", dataset="c4_train",
                     answer=None, calibration_seed=0, search="greedy", variant="default", budget=2, search_seed=0,
                     stand_in=False)
    data = {"schema": SCHEMA, "cell": "m-ppl-greedy-M2", "identity": ident.to_dict(), "n_layers": 6,
            "removed": [1, 4], "calibration_loss": 3.25, "evaluated": True, "objective_params": {"seed": 0},
            "metrics": {"avg_acc": 0.5}, "cost": {"evaluations": 9, "layer_forwards": 40, "layer_backwards": 0,
                                                   "seconds": 1.5, "search_seconds": 1.0},
            "environment": {"dtype": "torch.float32"}, "fingerprint": "f", "settings": {},
            "trace": [[[1], 3.0], [[1, 4], 3.25]]}
    return {**data, **over}


def test_a_read_result_is_a_result_with_typed_accessors():
    r = validate(stored(), "here")
    assert isinstance(r, Result)
    assert r.identity == Identity(**stored()["identity"])
    assert (r.identity.model, r.identity.search, r.identity.budget) == ("m", "greedy", 2)
    assert r.condition == Condition(grid="g", model="m", objective="ppl", budget=2) == ("g", "m", "ppl", 2)
    assert r.cell == "m-ppl-greedy-M2" and r.removed == [1, 4] and r.calibration_loss == 3.25 and r.evaluated
    assert r.metrics == {"avg_acc": 0.5} and r.cost["evaluations"] == 9


def test_it_is_a_mapping_over_the_stored_form_only():
    r = validate(stored(), "here")
    assert list(r) == list(stored()) and len(r) == len(stored())
    assert r["trace"] == stored()["trace"] and r.get("prior") is None and r.get("prior", []) == []
    assert "identity" in r and "model" not in r
    assert r == stored() and r == validate(stored(), "again") and r != stored(removed=[0, 1])


@pytest.mark.parametrize("key", sorted(Identity.__dataclass_fields__))
def test_a_lifted_identity_read_raises_and_says_how_to_read_it(key):
    r = validate(stored(), "here")
    with pytest.raises(KeyError, match=rf"r\.identity\.{key}"):
        r[key]
    with pytest.raises(KeyError, match=rf"r\.identity\.{key}"):
        r.get(key)
    with pytest.raises(KeyError, match=rf"r\.identity\.{key}"):
        r.get(key, "default")


def test_it_is_read_only_and_does_not_follow_its_source():
    data = stored()
    r = validate(data, "here")
    with pytest.raises(TypeError):
        r["removed"] = [0]  # type: ignore[index]
    with pytest.raises(TypeError):
        r["identity"]["model"] = "other"
    data["identity"]["model"] = "other"  # the caller's dict changing later changes nothing
    data["removed"] = [0]
    assert r.identity.model == "m" and r["identity"]["model"] == "m" and r.removed == [1, 4]


def test_replace_gives_a_new_result():
    r = validate(stored(), "here")
    s = r.replace(removed=[2, 3], speed={"median": 1.2})
    assert (s.removed, s["speed"], r.removed, "speed" in r) == ([2, 3], {"median": 1.2}, [1, 4], False)
    t = r.replace(identity=dataclasses.replace(r.identity, grid="h", budget=3))
    assert t.condition == ("h", "m", "ppl", 3) and t["identity"]["grid"] == "h" and r.identity.grid == "g"
    with pytest.raises(KeyError, match="identity="):
        r.replace(model="other")


def test_replace_drops_fields_and_refuses_to_drop_identity_ones():
    s = validate(stored(), "here").replace(speed={"median": 1.2})
    t = s.replace(drop=["speed", "not-there"], removed=[0])
    assert ("speed" in t, t.removed, "speed" in s) == (False, [0], True)
    assert list(t) == [k for k in s if k != "speed"]  # the stored form's order, less what is dropped
    with pytest.raises(KeyError, match="identity="):
        s.replace(drop=["search"])


def test_the_stored_form_and_its_bytes_do_not_change(tmp_path):
    data = stored()
    r = check_result(json.loads(json.dumps(data)), tmp_path / "x.json")
    back = to_json(r)
    assert back == data and type(back) is dict and type(back["identity"]) is dict
    assert json.dumps(back) == json.dumps(data)  # key order kept, identity nested, nothing lifted
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_result(a, data)
    write_result(b, read_result(a))  # a read result written again: the same bytes
    assert a.read_bytes() == b.read_bytes()
    assert to_json(data) == data  # a new result (recipe.make_result's dict) already is the stored form


def test_a_copy_is_a_result_too():
    r = validate(stored(), "here")
    c = copy.deepcopy(r)
    assert isinstance(c, Result) and c == r and c.identity == r.identity


def test_validate_still_refuses_what_is_no_result_and_checks_a_result_again():
    with pytest.raises(ResultError, match="here: missing field"):
        validate({k: v for k, v in stored().items() if k != "cost"}, "here")
    r = validate(stored(), "here")
    assert validate(r, "again") == r  # what the rehearsal's check does with GridRunner.result's answer
    with pytest.raises(ResultError, match="again: missing field"):
        validate(Result({k: v for k, v in stored().items() if k != "cost"}), "again")
