"""The two P&C protocol settings of a method entry (pnc.studies.mujoco.grid): ``base_steps`` (P&C's base
network in a run of its own with its own step cap) and ``calibration_pool`` (the calibration set
drawn from the train split or from the whole ID pool), and config/offline_authors.yaml, the
reference protocol with both set to the authors'."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest
import yaml
from study_config import study_config
from test_calibration import _write_splits, grid_table, study  # noqa: F401

from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.studies.mujoco import grid
from pnc.studies.mujoco.config_check import cross_key_problems

ROOT = Path(__file__).resolve().parents[1]
PNC = {"fixed": {"n_members": 4, "rank": 2, "calibration_size": 300}, "grid": {"sigma": [1.0, 4.0]}}


# ----------------------------------------------------------------------------- the grid


def test_defaults_keep_the_shared_base_run_and_the_train_split():
    points = grid.expand_all({"pnc": PNC, "pnc_nocorr": {}, "swag": {}})
    assert {p.spec for pts in points.values() for p in pts} == {TrainingSpec("base")}
    assert {p.calibration_pool for pts in points.values() for p in pts} == {"train"}
    assert TrainingSpec("base").key_id == "base"


def test_base_steps_gives_pnc_and_its_ablation_their_own_run_and_nothing_else():
    plain = grid.expand_all({"pnc": PNC, "pnc_nocorr": {}, "swag": {}, "mc_dropout": {}})
    own = grid.expand_all(
        {
            "pnc": {**PNC, "base_steps": 2000},
            "pnc_nocorr": {"base_steps": 2000},
            "swag": {},
            "mc_dropout": {},
        }
    )
    for method in ("pnc", "pnc_nocorr"):
        assert {p.run_id for p in own[method]} == {"base-steps2000"}
        assert [p.config for p in own[method]] == [p.config for p in plain[method]]
        assert [p.config_id for p in own[method]] == [p.config_id for p in plain[method]]
    for method in ("swag", "mc_dropout"):
        assert own[method] == plain[method]
    spec = own["pnc"][0].spec
    assert spec.kind == "base" and dict(spec.options) == {"steps": 2000}
    assert spec.key_id == "base"  # the shared base run's training key
    subspace = grid.expand("subspace", {})[0].spec  # other runs keep their run id as key
    assert subspace.key_id == subspace.run_id != "subspace"


def test_calibration_pool_changes_only_the_pool():
    plain = grid.expand("pnc", PNC)
    pooled = grid.expand("pnc", {**PNC, "calibration_pool": "id_pool"})
    assert {p.calibration_pool for p in pooled} == {"id_pool"}
    assert [(p.config, p.config_id, p.spec) for p in pooled] == [
        (p.config, p.config_id, p.spec) for p in plain
    ]


@pytest.mark.parametrize(
    "method, entry, match",
    [
        ("pnc", {"base_steps": 0}, "positive number of steps"),
        ("pnc", {"base_steps": 2000.5}, "positive number of steps"),
        ("pnc", {"base_steps": True}, "positive number of steps"),
        ("pnc", {"calibration_pool": "val"}, "calibration_pool = 'val': valid: train, id_pool"),
        ("pnc_nocorr", {"calibration_pool": "id_pool"}, r"unknown key\(s\) \['calibration_pool'\]"),
        ("swag", {"base_steps": 2000}, r"unknown key\(s\) \['base_steps'\]"),
    ],
)
def test_bad_values_fail_naming_the_key(method, entry, match):
    with pytest.raises(ValueError, match=match):
        grid.expand(method, entry)


def test_pnc_and_its_ablation_must_share_the_base_run():
    with pytest.raises(ValueError, match="pnc_nocorr.base_steps = None"):
        grid.expand_all({"pnc": {"base_steps": 2000}, "pnc_nocorr": {}})


def _study_config(methods, steps=5000):
    return {
        "envs": ["InvertedPendulum"],
        "data": {
            "source": "offline",
            "transitions_per_regime": 10000,
            "val_fraction": 0.1,
            "id_transitions": None,
            "target": "next_state",
            "far_transitions": 10000,
            "offline_transitions": 25000,
        },
        "model": {"hidden": [200, 200, 200, 200], "min_logvar": -10.0, "max_logvar": 4.0},
        "train": {"steps": steps},
        "methods": methods,
    }


def test_study_checks_count_the_calibration_size_against_its_pool():
    too_big = {"fixed": {"calibration_size": 9500}}  # > 9,000 train rows, <= 10,000 pool rows
    config = _study_config({"pnc": too_big})
    found = cross_key_problems(config, grid.expand_all(config["methods"]))
    assert any("9500 is larger than the 9000 rows" in e for e in found.errors), found.errors
    config = _study_config({"pnc": {**too_big, "calibration_pool": "id_pool"}})
    assert cross_key_problems(config, grid.expand_all(config["methods"])).errors == []


def test_base_steps_equal_to_the_shared_steps_is_an_error():
    config = _study_config({"pnc": {"base_steps": 5000}})
    errors = cross_key_problems(config, grid.expand_all(config["methods"])).errors
    assert errors == [
        "methods.pnc.base_steps = 5000 equals train.steps = 5000: leave it null to build on the "
        "shared base run"
    ]


# ----------------------------------------------------------------------------- the stages


def test_own_base_run_is_the_shared_recipe_at_its_own_step_cap(study, tmp_path):  # noqa: F811
    from pnc.studies.mujoco.stages import train_run

    train = {"steps": 120, "batch_size": 32, "patience": None}
    where = dict(env="Toy", seed=0, splits_dir=study / "splits", model={"hidden": [16, 16]})
    own = TrainingSpec("base", (("steps", 40),))
    summary = train_run(spec=own, out_dir=tmp_path / "own", train=train, **where)
    assert summary["run_id"] == "base-steps40" and summary["steps_taken"] == 40
    shared = train_run(
        spec=TrainingSpec("base"), out_dir=tmp_path / "at40", train={**train, "steps": 40}, **where
    )
    assert shared["steps_taken"] == 40
    a, b = TrainingRun.load(tmp_path / "own"), TrainingRun.load(tmp_path / "at40")
    assert a.spec == own and a.meta["train_config"]["steps"] == 40
    for x, y in zip(jax.tree.leaves(a.model.params), jax.tree.leaves(b.model.params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    full = TrainingRun.load(study / "run")  # the fixture's 200-step shared run differs
    assert not np.array_equal(
        np.asarray(jax.tree.leaves(a.model.params)[0]),
        np.asarray(jax.tree.leaves(full.model.params)[0]),
    )


def test_a_base_run_rejects_other_options():
    from pnc.methods import regression as methods

    with pytest.raises(ValueError, match="accepts the option 'steps' only"):
        methods.get("pnc").train(
            TrainingSpec("base", (("rate", 0.1),)), None, None, model_config=None,
            train_config=None, key=None,
        )  # fmt: skip


def test_calibration_pool_rows_are_train_then_validation():
    from pnc.studies.mujoco.stages import calibration_pool_rows

    rng = np.random.default_rng(1)
    splits = {s: (rng.normal(size=(n, 3)), rng.normal(size=(n, 2))) for s, n in
              (("train", 7), ("val", 3))}  # fmt: skip
    assert calibration_pool_rows(splits, "train") is splits["train"]
    x, y = calibration_pool_rows(splits, "id_pool")
    np.testing.assert_array_equal(x, np.concatenate([splits["train"][0], splits["val"][0]]))
    np.testing.assert_array_equal(y, np.concatenate([splits["train"][1], splits["val"][1]]))
    with pytest.raises(ValueError, match="unknown calibration pool"):
        calibration_pool_rows(splits, "far")


def _evaluate(study, method, entry, data="splits"):  # noqa: F811
    from pnc.studies.mujoco.stages import evaluate_run

    points = grid.points_from_table(method, grid_table(method, entry))
    frame, _ = evaluate_run(
        env="Toy",
        seed=0,
        method_id=method,
        run_id="base",
        run_dir=study / "run",
        splits_dir=study / data,
        points=[p for p in points if p.run_id == "base"],
    )
    return frame


def test_id_pool_calibrates_on_train_and_validation_rows(study):  # noqa: F811
    """P&C on ``id_pool`` is P&C on ``train`` with the validation rows appended to the train
    split (the run, its standardisers and every evaluated split unchanged)."""
    from pnc.studies.mujoco.stages import load_split_arrays

    splits, _ = load_split_arrays(study / "splits")
    joined = {**splits, "train": tuple(np.concatenate([splits["train"][i], splits["val"][i]])
                                       for i in (0, 1))}  # fmt: skip
    _write_splits(study / "joined", joined)
    plain = _evaluate(study, "pnc", PNC)
    pooled = _evaluate(study, "pnc", {**PNC, "calibration_pool": "id_pool"})
    pd.testing.assert_frame_equal(pooled, _evaluate(study, "pnc", PNC, data="joined"))
    assert not np.allclose(plain["value"], pooled["value"])


def test_members_record_their_pool(study, tmp_path):  # noqa: F811
    from pnc.studies.mujoco.pnc_members import write_pnc_members

    entry = {**PNC, "calibration_pool": "id_pool"}
    selection = {"Toy": {"pnc": {"config": grid.expand("pnc", entry)[0].config_id}}}
    record = write_pnc_members(
        env="Toy", seed=0, run_dir=study / "run", splits_dir=study / "splits",
        selection=selection, table=grid_table("pnc", entry), out_dir=tmp_path,
    )  # fmt: skip
    n_train, n_val = 400, 120
    assert record["calibration_pool"] == "id_pool"
    assert record["n_calibration_pool"] == n_train + n_val
    rows = np.asarray(record["calibration_rows"])
    assert len(rows) == 300 and len(set(rows)) == 300 and rows.max() < n_train + n_val


# ----------------------------------------------------------------------------- the configs


def _flatten(tree, prefix=()):
    if isinstance(tree, dict):
        out = {}
        for key, value in tree.items():
            out.update(_flatten(value, (*prefix, key)))
        return out
    return {prefix: tree}


def test_authors_config_is_the_reference_with_the_two_settings_switched():
    # the overlays differ in these keys only, and so do the studies they give (config.yaml with
    # each merged in)
    overlays = [_flatten(yaml.safe_load((ROOT / f"config/{n}.yaml").read_text()))
                for n in ("offline", "offline_authors")]  # fmt: skip
    assert {k for k in overlays[0].keys() | overlays[1].keys()
            if overlays[0].get(k, "unset") != overlays[1].get(k, "unset")} == {
        ("methods", "pnc", "base_steps"), ("methods", "pnc_nocorr", "base_steps"),
        ("methods", "pnc", "calibration_pool")}  # fmt: skip
    ours = _flatten(study_config("config/offline.yaml"))
    theirs = _flatten(study_config("config/offline_authors.yaml"))
    changed = {
        k for k in ours.keys() | theirs.keys() if ours.get(k, "unset") != theirs.get(k, "unset")
    }
    assert changed == {
        ("methods", "pnc", "base_steps"),
        ("methods", "pnc_nocorr", "base_steps"),
        ("methods", "pnc", "calibration_pool"),
    }
    assert theirs[("methods", "pnc", "base_steps")] == 2000
    assert theirs[("methods", "pnc_nocorr", "base_steps")] == 2000
    assert theirs[("methods", "pnc", "calibration_pool")] == "id_pool"
    points = grid.expand_all(study_config("config/offline_authors.yaml")["methods"])
    assert {p.run_id for m in ("pnc", "pnc_nocorr") for p in points[m]} == {"base-steps2000"}
    assert {p.run_id for p in points["swag"]} == {"base"}
    assert json.dumps(sorted(points)) == json.dumps(sorted(ours_methods()))


def ours_methods():
    return study_config("config/offline.yaml")["methods"]
