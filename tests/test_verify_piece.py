"""`python -m pnc.report verify-piece`: a re-run piece against the stored reference's seeds.

The store is a slice of the committed reference (InvertedPendulum, five seeds, three methods),
so the checks run on real metric tables; the re-runs are copies of a stored seed, edited.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pnc.report import verify
from pnc.report.__main__ import main
from pnc.report.pieces import MANIFESTS
from pnc.studies.mujoco.selection import read_metric_tables, select

REFERENCE = Path(__file__).resolve().parents[1] / "docs/results/offline/pieces"
ENV = "InvertedPendulum"
SEEDS = (0, 1, 2, 3, 4)
METHODS = ("swag", "mc_dropout", "laplace")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    for seed in SEEDS:
        manifest = Path(MANIFESTS) / ENV / f"seed{seed}.json"
        (root / manifest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REFERENCE / manifest, root / manifest)
        for method in METHODS:
            rel = Path(verify.metric_dir(ENV, seed)) / method
            shutil.copytree(REFERENCE / rel, root / rel)
    return root


def _rerun(store: Path, tmp_path: Path, seed: int = 2) -> Path:
    rel = verify.metric_dir(ENV, seed)
    shutil.copytree(store / rel, tmp_path / rel)
    return tmp_path


def _edit(study: Path, method: str, where, value) -> None:
    """Rewrite every table of ``method`` in the re-run, setting ``value(old)`` where ``where``."""
    for path in sorted((study / verify.metric_dir(ENV, 2) / method).glob("*.csv")):
        frame = pd.read_csv(path, dtype={"config": str})
        mask = where(frame)
        frame.loc[mask, "value"] = value(frame.loc[mask, "value"])
        frame.to_csv(path, index=False)


def _selected(store: Path, method: str) -> tuple[str, str]:
    """The stored cross-seed selection of ``method``."""
    tables = [p for s in SEEDS for p in (store / verify.metric_dir(ENV, s) / method).glob("*.csv")]
    record = select(read_metric_tables(tables), SEEDS)[ENV][method]
    return record["config"], record["calibration"]


def test_the_selection_is_the_studys_rule(store):
    """:func:`verify.cross_seed_selection` chooses what the study's selection stage chooses."""
    tables = [p for s in SEEDS for p in (store / verify.metric_dir(ENV, s)).rglob("*.csv")]
    mine = verify.cross_seed_selection(verify.read_tables(tables), list(SEEDS))
    study = select(read_metric_tables(tables), SEEDS)[ENV]
    assert set(mine) == set(study) == set(METHODS)
    for method, rec in study.items():
        assert mine[method]["choice"] == (rec["config"], rec["calibration"])
        keys = [f"{c}|{k}" for c, k in mine[method]["candidates"]]
        assert keys == list(rec["candidates"])
        assert list(mine[method]["candidates"].values()) == list(rec["candidates"].values())


def test_a_copy_of_the_stored_seed_is_byte_identical(store, tmp_path, capsys):
    study = _rerun(store, tmp_path)
    assert main(["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]) == 0
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["verdict"] == "byte-identical" and report["selection_same"]
    assert len(report["bytes"]["identical"]) == 7 and not report["bytes"]["different"]
    assert report["rows_outside"] == 0
    # every metric of the selected candidates is checked, on every split the tables hold
    assert {r["method"] for r in report["metrics"]} == set(METHODS)
    assert {r["split"] for r in report["metrics"]} == {"val", "id", "near", "far"}
    assert "byte-identical: 7 of 7" in capsys.readouterr().out


def test_a_small_change_is_within_the_spread_but_not_identical(store, tmp_path):
    study = _rerun(store, tmp_path)
    config, calibration = _selected(store, "swag")
    _edit(
        study,
        "swag",
        lambda f: (f["config"] == config) & (f["split"] == "far") & (f["metric"] == "rmse"),
        lambda v: v * (1 + 1e-4),
    )
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["verdict"] == "within the seeds' spread"
    assert report["bytes"]["different"] == [f"{verify.metric_dir(ENV, 2)}/swag/base.csv"]


def test_a_value_far_outside_the_seeds_fails_and_is_named_first(store, tmp_path, capsys):
    study = _rerun(store, tmp_path)
    config, calibration = _selected(store, "laplace")
    rows = lambda f: (
        (f["config"] == config)
        & (f["calibration"] == calibration)
        & (f["split"] == "near")
        & (f["metric"] == "rmse")
    )
    _edit(study, "laplace", rows, lambda v: v * 50)
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main([*args, "--out", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert "outside the seeds' spread" in out and "1 outside" in out
    report = verify.verify_piece(study, store, ENV, 2)
    top = report["largest"]
    assert (top["method"], top["split"], top["metric"]) == ("laplace", "near", "rmse")
    assert top["t"] > top["limit"] and report["rows_outside"] == 1
    assert (tmp_path / "r.json").is_file()


def test_a_moved_selection_fails_and_names_the_method(store, tmp_path, capsys):
    study = _rerun(store, tmp_path)
    config, calibration = _selected(store, "mc_dropout")
    # another candidate's validation NLL far below every stored one: the selection moves to it
    other = lambda f: (
        (f["split"] == "val")
        & (f["metric"] == "nll")
        & ((f["config"] != config) | (f["calibration"] != calibration))
    )
    frame = pd.concat(
        pd.read_csv(p, dtype={"config": str})
        for p in (study / verify.metric_dir(ENV, 2) / "mc_dropout").glob("*.csv")
    ).reset_index(drop=True)
    # the candidate the stored seeds rank worst: a move to it is no near tie
    val = frame[other(frame)]
    target = val.loc[val["value"].idxmax()]
    _edit(
        study,
        "mc_dropout",
        lambda f: (
            other(f)
            & (f["config"] == target["config"])
            & (f["calibration"] == target["calibration"])
        ),
        lambda v: v - 1e4,
    )
    report = verify.verify_piece(study, store, ENV, 2)
    moved = report["selection"]["mc_dropout"]
    assert not moved["same"] and moved["rerun"] == [target["config"], target["calibration"]]
    assert moved["val_nll_gap"] > 0 and not moved["near_tie"]
    assert moved["stored_gap"] > 0 and report["verdict"] == "outside the seeds' spread"
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main(args) == 1
    assert "selection of mc_dropout moves" in capsys.readouterr().out


def test_zero_spread_rows_are_within_only_when_equal():
    stored = pd.DataFrame(
        {
            "method": "m",
            "config": "c",
            "calibration": "raw",
            "seed": [0, 1, 2],
            "split": "id",
            "metric": "rmse",
            "value": 0.5,
        }
    )
    for value, within in ((0.5, True), (0.5 + 1e-6, False)):
        rerun = stored[stored["seed"] == 1].assign(value=value)
        table = verify.compare_metrics(stored, rerun, 1, {"m": ("c", "raw")})
        assert bool(table["within"].iloc[0]) is within
        assert bool(np.isfinite(table["t"].iloc[0])) is within


def test_bad_input_exits_2_naming_the_problem(store, tmp_path, capsys):
    args = ["verify-piece", ENV, "7", "--study", str(tmp_path), "--store", str(store)]
    assert main(args) == 2
    assert "no piece of InvertedPendulum seed 7" in capsys.readouterr().err
    assert main(["verify-piece", ENV, "2", "--study", str(tmp_path), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "no metric tables of InvertedPendulum seed 2" in err
    assert "nor" in err and verify.phase_dir("validation", ENV, 2) in err  # both layouts named
    study = _rerun(store, tmp_path)
    table = next((study / verify.metric_dir(ENV, 2) / "swag").glob("*.csv"))
    table.write_bytes(table.read_bytes()[:-20])  # cut mid-row
    assert main(["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]) == 2
    assert table.name in capsys.readouterr().err
    assert main(["verify-piece", ENV, "2", "--study", str(study), "--alpha", "2"]) == 2


def test_a_re_run_missing_a_method_is_refused_unless_partial(store, tmp_path, capsys):
    study = _rerun(store, tmp_path)
    shutil.rmtree(study / verify.metric_dir(ENV, 2) / "laplace")
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main(args) == 2
    assert "lacks the metric tables of ['laplace']" in capsys.readouterr().err
    assert main([*args, "--partial"]) == 0
    assert "not re-run, not checked: laplace" in capsys.readouterr().out
    report = verify.verify_piece(study, store, ENV, 2, partial=True)
    assert report["missing_methods"] == ["laplace"] and not report["byte_identical"]
    assert report["verdict"].startswith("within the seeds' spread (partial")
    assert {r["method"] for r in report["metrics"]} == {"swag", "mc_dropout"}


# ------------------------------------------------------------------ a re-run with two phases


def _two_phase(store: Path, tmp_path: Path, tested=None, seed: int = 2) -> Path:
    """The stored seed laid out as ``evaluation: two_phase`` writes it: every run's validation rows
    (and frontier-sample rows, which the store lacks) under ``results/validation``, the test splits
    of ``tested[method]`` (default: the stored choice, both calibrations) under ``results/test``."""
    for method in METHODS:
        config = (tested or {}).get(method) or _selected(store, method)[0]
        test_rows = []
        for path in sorted((store / verify.metric_dir(ENV, seed) / method).glob("*.csv")):
            frame = pd.read_csv(path, dtype={"config": str}, keep_default_na=False)
            val = frame[frame["split"] == "val"]
            sample = frame[frame["split"] == "id"].assign(split="id_sample", value=123.0)
            out = tmp_path / verify.phase_dir("validation", ENV, seed) / method / path.name
            out.parent.mkdir(parents=True, exist_ok=True)
            pd.concat([val, sample]).to_csv(out, index=False)
            test_rows.append(frame[(frame["split"] != "val") & (frame["config"] == config)])
        out = tmp_path / verify.phase_dir("test", ENV, seed) / f"{method}.csv"
        out.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(test_rows).to_csv(out, index=False)
    return tmp_path


def test_a_two_phase_copy_of_the_stored_seed_has_identical_values(store, tmp_path, capsys):
    study = _two_phase(store, tmp_path)
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "identical values" in out and "equals the stored piece's: 10 of 10" in out
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["layout"] == "two_phase" and report["byte_identical"]
    assert report["verdict"] == "identical values" and report["unchecked_choices"] == []
    assert report["rows_outside"] == 0
    # the stored choice of every method, on every split the store holds (no frontier sample)
    checked = {(r["method"], r["config"]) for r in report["metrics"]}
    assert checked == {(m, _selected(store, m)[0]) for m in METHODS}
    assert {r["split"] for r in report["metrics"]} == {"val", "id", "near", "far"}
    # the full layout's check of the same seed reads the same rows
    full = verify.verify_piece(_rerun(store, tmp_path / "full"), store, ENV, 2)
    assert full["verdict"] == "byte-identical" and full["selection"] == report["selection"]
    mine = {(r["method"], r["calibration"], r["split"], r["metric"]) for r in report["metrics"]}
    theirs = {(r["method"], r["calibration"], r["split"], r["metric"]) for r in full["metrics"]}
    assert theirs <= mine  # both calibrations of the choice are scored on the test splits


def test_a_two_phase_change_is_found_in_either_phase(store, tmp_path):
    study = _two_phase(store, tmp_path)
    table = study / verify.phase_dir("test", ENV, 2) / "swag.csv"
    frame = pd.read_csv(table, dtype={"config": str}, keep_default_na=False)
    far = (frame["split"] == "far") & (frame["metric"] == "rmse")
    frame.loc[far, "value"] *= 1 + 1e-4
    frame.to_csv(table, index=False)
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["verdict"] == "within the seeds' spread"
    assert report["bytes"]["different"] == [f"{verify.phase_dir('test', ENV, 2)}/swag.csv"]
    frame.loc[far, "value"] *= 50
    frame.to_csv(table, index=False)
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["verdict"] == "outside the seeds' spread"
    assert (report["largest"]["method"], report["largest"]["split"]) == ("swag", "far")
    # a validation value: the table is named, the selection recomputed from it
    study = _two_phase(store, tmp_path / "val")
    config, calibration = _selected(store, "laplace")
    path = next((study / verify.phase_dir("validation", ENV, 2) / "laplace").glob("*.csv"))
    frame = pd.read_csv(path, dtype={"config": str}, keep_default_na=False)
    nll = (frame["metric"] == "nll") & (frame["split"] == "val") & (frame["config"] == config)
    frame.loc[nll, "value"] += 1e3
    frame.to_csv(path, index=False)
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["bytes"]["different"] == [path.relative_to(study).as_posix()]
    assert not report["selection"]["laplace"]["same"]


def test_a_two_phase_re_run_that_tested_another_choice_says_so(store, tmp_path, capsys):
    config, _ = _selected(store, "mc_dropout")
    frame = pd.concat(
        pd.read_csv(p, dtype={"config": str})
        for p in (store / verify.metric_dir(ENV, 2) / "mc_dropout").glob("*.csv")
    )
    other = next(c for c in dict.fromkeys(frame["config"]) if c != config)
    study = _two_phase(store, tmp_path, tested={"mc_dropout": other})
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main(args) == 0
    assert "not scored on the test splits by the re-run" in capsys.readouterr().out
    report = verify.verify_piece(study, store, ENV, 2)
    assert report["unchecked_choices"] == ["mc_dropout"]
    assert {r["config"] for r in report["metrics"] if r["method"] == "mc_dropout"} == {other}


def test_a_two_phase_re_run_lacking_a_phase_is_named(store, tmp_path, capsys):
    study = _two_phase(store, tmp_path)
    (study / verify.phase_dir("test", ENV, 2) / "laplace.csv").unlink()
    args = ["verify-piece", ENV, "2", "--study", str(study), "--store", str(store)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "lacks the metric tables of ['laplace']" in err and "laplace has no test tables" in err
    assert main([*args, "--partial"]) == 0
    report = verify.verify_piece(study, store, ENV, 2, partial=True)
    assert report["missing_methods"] == ["laplace"] and not report["byte_identical"]
    assert {r["method"] for r in report["metrics"]} == {"swag", "mc_dropout"}
    shutil.rmtree(study / verify.phase_dir("test", ENV, 2))
    assert main(args) == 2
    assert "its test phase has not run" in capsys.readouterr().err
