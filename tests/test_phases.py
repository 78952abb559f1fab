"""The two-phase evaluation's pieces (pnc.studies.mujoco.phases): the test plan, the stored posteriors,
the plan and validation checks of the test phase, and the assembly of both phases' rows in the
full evaluation's order. The workflow runs them end to end in tests/test_workflow_run.py."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from pnc.runtime.io import ArtifactError
from pnc.studies.mujoco import phases
from pnc.studies.mujoco.evaluate import sample_rows
from pnc.studies.mujoco.per_sigma import per_sigma_choices, sigma_points
from pnc.studies.mujoco.selection import select


def _val_rows(nll: dict[tuple[str, str], list[float]], env: str = "Ant") -> pd.DataFrame:
    """Validation NLL rows: ``{(method, config): [value per seed]}``, raw and vcal (+0.5)."""
    rows = []
    for (method, config), values in nll.items():
        for calibration, shift in (("raw", 0.0), ("vcal", 0.5)):
            for seed, value in enumerate(values):
                rows.append(
                    (env, method, config, calibration, seed, "val", "nll", value + shift, "offline")
                )
    return pd.DataFrame(
        rows,
        columns=[
            "env", "method", "config", "calibration", "seed", "split", "metric", "value",
            "data_source",
        ],
    )  # fmt: skip


PNC = "sigma={},bootstrap_frac={},ridge=0.0001"


def test_plan_names_the_selected_and_the_per_sigma_configurations():
    frame = _val_rows(
        {
            ("pnc", PNC.format(8, 0.1)): [1.0, 1.2],
            ("pnc", PNC.format(8, 0.3)): [0.9, 1.0],  # best at sigma 8, and selected
            ("pnc", PNC.format(16, 0.1)): [2.0, 2.0],
            ("pnc", PNC.format(16, 0.3)): [1.5, 1.7],  # best at sigma 16
            ("pnc_nocorr", "sigma=8"): [3.0, 3.0],
            ("pnc_nocorr", "sigma=16"): [2.5, 2.5],
            ("swag", "scale=0.1"): [4.0, 4.0],
            ("swag", "scale=1.0"): [3.0, 3.5],
        }
    )
    # each configuration's sigma, as the grid tables give it (typed, never read from the id)
    sigmas = {(m, c): float(s) for m, c, s in (
        ("pnc", PNC.format(8, 0.1), 8), ("pnc", PNC.format(8, 0.3), 8),
        ("pnc", PNC.format(16, 0.1), 16), ("pnc", PNC.format(16, 0.3), 16),
        ("pnc_nocorr", "sigma=8", 8), ("pnc_nocorr", "sigma=16", 16),
    )}  # fmt: skip
    plan = phases.plan_test_splits(frame, select(frame), sigmas)["Ant"]
    sigma = phases.sigma_reason
    assert plan == {
        "pnc": {
            PNC.format(8, 0.3): [phases.SELECTED, sigma(8)],
            PNC.format(16, 0.3): [sigma(16)],
        },
        "pnc_nocorr": {"sigma=8": [sigma(8)], "sigma=16": [phases.SELECTED, sigma(16)]},
        "swag": {"scale=1.0": [phases.SELECTED]},
    }
    assert list(plan["pnc_nocorr"]) == ["sigma=8", "sigma=16"]  # grid order
    points = sigma_points(frame, "Ant", sigmas)
    assert points[["id_rmse", "far_nll"]].isna().all().all()  # validation rows only
    chosen = per_sigma_choices(points)
    assert list(zip(chosen.method, chosen.sigma, chosen.calibration, strict=True)) == [
        ("pnc", 8.0, "raw"), ("pnc", 16.0, "raw"), ("pnc_nocorr", 8.0, "raw"),
        ("pnc_nocorr", 16.0, "raw"),
    ]  # fmt: skip
    # a configuration the grid tables lack is named, not guessed from its id
    del sigmas[("pnc_nocorr", "sigma=16")]
    with pytest.raises(ValueError, match=r"no sigma for \[\('pnc_nocorr', 'sigma=16'\)\]"):
        sigma_points(frame, "Ant", sigmas)


def test_stored_posteriors_round_trip_and_a_cut_file_is_named(tmp_path):
    path = tmp_path / "subspace.npz"
    arrays = {
        "temperature=1": {"z": np.arange(6, dtype=np.float32).reshape(3, 2), "n_evals": 7},
        "temperature=10": {"z": np.ones((3, 2), np.float32), "n_evals": 9},
    }
    phases.write_posteriors(arrays, path)
    back = phases.read_posteriors(path)
    assert list(back) == list(arrays)
    for config, stored in arrays.items():
        assert np.array_equal(back[config]["z"], stored["z"])
        assert (
            back[config]["z"].dtype == np.float32
            and int(back[config]["n_evals"]) == stored["n_evals"]
        )
    phases.write_posteriors({}, tmp_path / "none.npz")
    assert phases.read_posteriors(tmp_path / "none.npz") == {}
    path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(ArtifactError, match=f"{path}.*snakemake --forcerun"):
        phases.read_posteriors(path)


def test_the_test_phase_needs_the_selection_of_its_environment(tmp_path):
    """A missing plan, or one without the (env, method), stops the test phase naming the file."""
    path = tmp_path / "results/envs/Ant/test_plan.json"
    with pytest.raises(ArtifactError, match=f"test plan {path} is missing.*forcerun"):
        phases.read_plan(path, "Ant", "pnc")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"Ant": {"swag": {"scale=1.0": ["selected"]}}}))
    with pytest.raises(ArtifactError, match=f"{path} holds no selection of Ant pnc"):
        phases.read_plan(path, "Ant", "pnc")
    path.write_text('{"Ant": ')
    with pytest.raises(ArtifactError, match="cannot read the test plan"):
        phases.read_plan(path, "Ant", "swag")


def test_the_test_phase_of_an_env_seed_takes_one_grid_and_one_output_per_method(tmp_path):
    """The one-process test phase (pnc.studies.mujoco.phases.run_test_phase) refuses lists that do not
    pair up, a repeated method, and stops at a method the plan lacks without writing its table."""
    common = dict(
        env="Ant",
        seed=0,
        runs_dir=tmp_path,
        splits_dir=tmp_path,
        validation_dir=tmp_path,
        plan_path=tmp_path / "plan.json",
    )
    with pytest.raises(ValueError, match="2 methods, 1 grid tables and 2 outputs"):
        phases.run_test_phase(methods=["pnc", "swag"], grids=["g"], outs=["a", "b"], **common)
    with pytest.raises(ValueError, match="a method is named twice"):
        phases.run_test_phase(methods=["swag", "swag"], grids=["g", "g"], outs=["a", "b"], **common)
    grid = tmp_path / "pnc.json"
    grid.write_text("{}")
    (tmp_path / "plan.json").write_text(json.dumps({"Ant": {"swag": {}}}))
    with pytest.raises(ArtifactError, match="holds no selection of Ant pnc"):
        phases.run_test_phase(methods=["pnc"], grids=[grid], outs=[tmp_path / "pnc.csv"], **common)
    assert not (tmp_path / "pnc.csv").exists()


def test_other_validation_rows_in_the_test_phase_are_refused():
    table = _val_rows({("swag", "scale=1.0"): [1.0]})
    same = table.copy()
    phases.check_same_validation(same, table, "v.csv", env="Ant", seed=0, method="swag")
    # below the tables' 10 significant digits: the same as written
    same["value"] = same["value"] * (1 + 1e-12)
    phases.check_same_validation(same, table, "v.csv", env="Ant", seed=0, method="swag")
    other = table.copy()
    other.loc[1, "value"] += 1e-6
    with pytest.raises(ArtifactError, match="other validation rows.*vcal nll.*v.csv"):
        phases.check_same_validation(other, table, "v.csv", env="Ant", seed=0, method="swag")


def test_assembly_puts_both_phases_in_the_full_evaluations_order():
    full = []
    for config in ("a", "b"):
        for calibration in ("raw", "vcal"):
            for split in ("val", "id", "far"):
                full.append(("Ant", "swag", config, calibration, 0, split, "nll", 1.0, "offline"))
    columns = list(_val_rows({}).columns)
    full = pd.DataFrame(full, columns=columns)
    validation = full[full.split == "val"]
    sample = validation.assign(split="far_sample")
    test = full[(full.split != "val") & (full.config == "b")]
    merged = phases.merge_phases(pd.concat([validation, sample]), test.iloc[::-1])
    keys = list(zip(merged.config, merged.calibration, merged.split, strict=True))
    assert keys == [
        ("a", "raw", "val"), ("a", "raw", "far_sample"), ("a", "vcal", "val"),
        ("a", "vcal", "far_sample"),
        ("b", "raw", "val"), ("b", "raw", "id"), ("b", "raw", "far"), ("b", "raw", "far_sample"),
        ("b", "vcal", "val"), ("b", "vcal", "id"), ("b", "vcal", "far"),
        ("b", "vcal", "far_sample"),
    ]  # fmt: skip
    with pytest.raises(ArtifactError, match="without validation rows"):
        phases.merge_phases(validation[validation.config == "a"], test)


def test_frontier_sample_rows_are_fixed_sorted_and_at_most_the_sample_size():
    rows = sample_rows(10_000, "Ant", 3, "far_sample")
    assert len(rows) == 1000 and np.all(np.diff(rows) > 0) and rows[-1] < 10_000
    assert np.array_equal(rows, sample_rows(10_000, "Ant", 3, "far_sample"))
    assert not np.array_equal(rows, sample_rows(10_000, "Ant", 4, "far_sample"))
    assert np.array_equal(sample_rows(500, "Ant", 3, "far_sample"), np.arange(500))
