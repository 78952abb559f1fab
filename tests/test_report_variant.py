"""A variant of a stored study (pnc.report.variant): which methods it runs, the config of its own
pieces, the reference pieces it reuses, and the comparison's variant columns and moves."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from study_config import study_config

from pnc.report import compare, export, pieces, variant, variant_moves
from pnc.report.__main__ import main
from pnc.runtime.io import file_sha256
from pnc.studies.mujoco import grid

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "docs" / "results" / "paper"
# the configs as the workflow reads them: overlays merged into config.yaml
OURS = variant.read_config(ROOT / "config/offline.yaml")
AUTHORS = variant.read_config(ROOT / "config/offline_authors.yaml")


def test_the_authors_variant_runs_pnc_and_its_ablation_only():
    assert variant.changed_methods(AUTHORS, OURS) == ["pnc", "pnc_nocorr"]
    config = variant.study_config(AUTHORS, OURS, "full")
    assert list(config["methods"]) == config["run_methods"] == ["pnc", "pnc_nocorr"]
    assert config["methods"]["pnc"] == AUTHORS["methods"]["pnc"]
    assert config["evaluation"] == "full" and config["mechanism"]["enabled"] is False
    for key in ("data", "model", "train", "envs", "seeds", "variance_calibration"):
        assert config[key] == AUTHORS[key], key
    points = grid.expand_all(config["methods"])
    assert {p.run_id for pts in points.values() for p in pts} == {"base-steps2000"}


def _edited(edit):
    config = copy.deepcopy(AUTHORS)
    edit(config)
    return config


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda c: c["train"].update(steps=4000), "the variant changes train: every method"),
        (lambda c: c["data"].update(seed=1), "the variant changes data"),
        (lambda c: c.update(variance_calibration=["raw"]), "changes variance_calibration"),
        (lambda c: c["methods"].pop("swag"), "are not the reference's"),
        (lambda c: c.update(seeds=[0, 10]), r"seeds \[10\] are not in the reference's"),
        (lambda c: c.update(methods=copy.deepcopy(OURS["methods"])), "nothing to run"),
    ],
)
def test_a_variant_that_moves_every_method_is_refused(edit, match):
    with pytest.raises(ValueError, match=match):
        variant.changed_methods(_edited(edit), OURS)


def test_a_variant_may_run_fewer_environments_and_seeds():
    config = _edited(lambda c: c.update(envs=["InvertedPendulum"], seeds=[0]))
    assert variant.changed_methods(config, OURS) == ["pnc", "pnc_nocorr"]


def _manifest(store: Path, env: str, seed: int, files: list[str]) -> None:
    entries = {}
    for name in files:
        path = store / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n")
        entries[name] = {"sha256": file_sha256(path), "bytes": path.stat().st_size}
    target = store / pieces.MANIFESTS / env / f"seed{seed}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"env": env, "seed": seed, "files": entries}))


FULL = ["results/metrics/IP/seed0/pnc/base.csv", "results/metrics/IP/seed0/swag/base.csv"]
TWO_PHASE = ["results/validation/IP/seed0/swag/base.csv", "results/test/IP/seed0/swag.csv"]


@pytest.mark.parametrize(
    "files, expected",
    [(FULL, "full"), (TWO_PHASE, "two_phase"), (FULL + TWO_PHASE, None), ([], None)],
)
def test_the_stores_evaluation_is_read_from_its_pieces(tmp_path, files, expected):
    if files:
        _manifest(tmp_path, "IP", 0, files)
    if expected is None:
        with pytest.raises(ValueError, match="cannot tell its evaluation"):
            variant.store_evaluation(tmp_path)
    else:
        assert variant.store_evaluation(tmp_path) == expected


@pytest.mark.parametrize(
    "path, method",
    [
        ("results/metrics/Ant/seed0/pnc/base.csv", "pnc"),
        ("results/validation/Ant/seed3/swag/base.npz", "swag"),
        ("results/test/Ant/seed0/laplace.csv", "laplace"),
        ("benchmarks/evaluate/Ant/seed0/pnc_nocorr/base-steps2000.tsv", "pnc_nocorr"),
        ("benchmarks/evaluate_test/Ant/seed0/pnc.process.json", "pnc"),  # one job per method
        ("benchmarks/evaluate_test/Ant/seed0.tsv", None),  # one job for every method
        ("benchmarks/train/Ant/seed0/base.tsv", None),
        ("benchmarks/splits/Ant/seed0.tsv", None),
    ],
)
def test_method_of_a_stored_file(path, method):
    assert pieces.method_of(path) == method


def test_restoring_a_reference_leaves_out_the_variants_methods(tmp_path):
    store, study = tmp_path / "store", tmp_path / "study"
    _manifest(store, "IP", 0, FULL)
    for name in ("evaluate/IP/seed0/pnc/base.tsv", "evaluate/IP/seed0/swag/base.tsv",
                 "train/IP/seed0/base.tsv"):  # fmt: skip
        (store / "benchmarks" / name).parent.mkdir(parents=True, exist_ok=True)
        (store / "benchmarks" / name).write_text("s\n1\n")
    assert main(["restore-pieces", str(store), "--study", str(study), "--skip-methods", "pnc"]) == 0
    restored = sorted(p.relative_to(study).as_posix() for p in study.rglob("*") if p.is_file())
    assert restored == [
        "benchmarks/evaluate/IP/seed0/swag/base.tsv",
        "benchmarks/train/IP/seed0/base.tsv",
        "results/metrics/IP/seed0/swag/base.csv",
    ]


def test_a_variants_piece_stores_only_its_own_jobs_benchmarks(tmp_path):
    """A variant run in the reference's directory: the piece lists P&C's tables on P&C's own run;
    the reference's evaluations and base run in the same directory are not the piece's."""
    study, store = tmp_path / "study", tmp_path / "store"
    table = study / "results/metrics/IP/seed0/pnc/base-steps2000.csv"
    table.parent.mkdir(parents=True)
    table.write_text("x\n")
    for name in ("evaluate/IP/seed0/pnc/base-steps2000.tsv", "evaluate/IP/seed0/swag/base.tsv",
                 "train/IP/seed0/base.tsv", "train/IP/seed0/base-steps2000.tsv",
                 "splits/IP/seed0.tsv"):  # fmt: skip
        (study / "benchmarks" / name).parent.mkdir(parents=True, exist_ok=True)
        (study / "benchmarks" / name).write_text("s\n1\n")
    manifest = tmp_path / "piece.json"
    pieces.write_manifest("IP", 0, [table], manifest, study_dir=study)
    pieces.store_piece(manifest, study, store)
    stored = sorted(p.relative_to(store / "benchmarks").as_posix()
                    for p in (store / "benchmarks").rglob("*.tsv"))  # fmt: skip
    assert stored == [
        "evaluate/IP/seed0/pnc/base-steps2000.tsv",
        "splits/IP/seed0.tsv",
        "train/IP/seed0/base-steps2000.tsv",
    ]


def test_variant_config_command_writes_the_restricted_config(tmp_path, capsys):
    store = tmp_path / "store"
    _manifest(store, "IP", 0, FULL)
    out = tmp_path / "variant.yaml"
    args = ["variant-config", str(ROOT / "config/offline_authors.yaml"), "--reference",
            str(ROOT / "config/offline.yaml"), "--reuse", str(store), "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    assert capsys.readouterr().out.split() == ["pnc", "pnc_nocorr"]
    assert yaml.safe_load(out.read_text()) == variant.study_config(AUTHORS, OURS, "full")
    # ... which, merged into config.yaml as --configfile is, runs the changed methods only
    assert list(study_config(out)["methods"]) == ["pnc", "pnc_nocorr"]


# ----------------------------------------------------------------------------- the comparison


@pytest.mark.parametrize(
    "ours, variant_value, expected",
    [
        (3.0, 2.0, variant_moves.TOWARD),
        (2.0, 3.0, variant_moves.AWAY),
        (3.0, 3.0, variant_moves.UNCHANGED),
        (1.0, 3.0, variant_moves.UNCHANGED),
    ],  # fmt: skip
)
def test_direction_compares_the_distances_to_the_paper(ours, variant_value, expected):
    assert variant_moves.direction(ours, variant_value, 2.0) == expected


def _folder(root: Path, name: str, pnc_id_rmse: float) -> Path:
    """The paper's appendix means with P&C's ID RMSE multiplied by ``pnc_id_rmse``."""
    frame = pd.read_csv(PAPER / "results.csv")
    rows = (frame.method == "pnc") & (frame.split == "id") & (frame.metric == "rmse")
    frame.loc[rows, "value"] *= pnc_id_rmse
    folder = root / name
    folder.mkdir()
    frame.to_csv(folder / "results.csv", index=False)
    return folder


@pytest.mark.slow  # the statistics of three folders: about 20 s on a busy 2-core machine
def test_the_comparison_gains_the_variants_columns_and_moves(tmp_path):
    ours = _folder(tmp_path, "offline", 100.0)  # P&C last (6th of 6) on ID RMSE everywhere
    _folder(tmp_path, "offline_authors", 1.0)  # the paper's own numbers
    assert compare.read_variants(ours) == []
    (ours / compare.VARIANTS_FILE).write_text(json.dumps({"offline_authors": "authors' settings"}))
    text = compare.comparison_text(ours, PAPER)
    header = next(line for line in text.splitlines() if line.startswith("| Method | ID RMSE"))
    assert header.split(" | ")[1:] == [
        "ID RMSE ↓, ours, draws", "ID RMSE ↓, authors' settings, draws",
        "ID RMSE ↓, paper, recomputed", "ID RMSE ↓, paper, printed |",
    ]  # fmt: skip
    assert "## authors' settings: what the variant moves" in text
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if "mean rank |" in line
            or "wins |" in line}  # fmt: skip
    assert "| toward the paper |" in rows["P&C's ID RMSE mean rank"]
    assert "| 6.00 | 3.09 | 3.09 |" in rows["P&C's ID RMSE mean rank"]
    assert "| toward the paper |" in rows["P&C's ID RMSE wins"]
    # the Far ranks do not move, Subspace's ID rank moves with P&C's
    assert "| unchanged |" in rows["P&C's Far AUROC mean rank"]
    assert "| toward the paper |" in rows["Subspace's ID RMSE mean rank"]
    moves = variant_moves.variant_moves(
        compare.our_readings(pd.read_csv(ours / "results.csv")),
        compare.our_readings(pd.read_csv(tmp_path / "offline_authors/results.csv")),
        compare.statistics_of(pd.read_csv(PAPER / "results.csv")),
    )
    assert [m.moves for m in moves if m.quantity.startswith("P&C's ID")] == [variant_moves.TOWARD] * 2
    assert all(m.variant == pytest.approx(m.paper) for m in moves)


@pytest.mark.slow
def test_check_rebuilds_a_comparison_with_a_variant(tmp_path):
    ours = _folder(tmp_path, "offline", 100.0)
    _folder(tmp_path, "offline_authors", 1.0)
    (ours / compare.VARIANTS_FILE).write_text(json.dumps({"offline_authors": "authors' settings"}))
    export.build_tables(ours, ours / "tables")
    compare.write_comparison(ours, PAPER)
    assert export.check_folder(ours, PAPER) == []
    moved = pd.read_csv(tmp_path / "offline_authors/results.csv")
    moved.loc[moved.method == "pnc", "value"] *= 1.01
    moved.to_csv(tmp_path / "offline_authors/results.csv", index=False)
    assert export.check_folder(ours, PAPER) != []


def test_a_variant_without_results_is_named(tmp_path):
    ours = _folder(tmp_path, "offline", 1.0)
    (ours / compare.VARIANTS_FILE).write_text(json.dumps({"offline_authors": "authors' settings"}))
    with pytest.raises(FileNotFoundError, match="offline_authors, which has no results.csv"):
        compare.comparison_text(ours, PAPER)


def test_the_mechanism_table_uses_the_seeds_stored_for_every_environment(tmp_path):
    for env, seed in (("Ant", 0), ("Ant", 1), ("Ant", 2), ("Hopper", 1), ("Hopper", 2)):
        _manifest(tmp_path, env, seed, [f"results/mechanism/{env}/seed{seed}.parquet"])
    assert pieces.seeds_of_every_env(tmp_path, ["Ant", "Hopper"]) == [1, 2]
    assert pieces.seeds_of_every_env(tmp_path, ["Ant"]) == [0, 1, 2]
    with pytest.raises(
        pieces.PieceError, match=r"no seed is stored for every environment \(none of Swimmer\)"
    ):
        pieces.seeds_of_every_env(tmp_path, ["Ant", "Swimmer"])


def test_a_mechanism_piece_stores_no_training_benchmark(tmp_path):
    """Its study holds the restored reference's training benchmarks under the same paths as the
    runs it made again: none is attributed to the piece."""
    study, store = tmp_path / "study", tmp_path / "store"
    out = study / "results/mechanism/IP/seed1.parquet"
    out.parent.mkdir(parents=True)
    out.write_text("x\n")
    for name in (
        "train/IP/seed1/base.tsv",
        "mechanism/IP/seed1.tsv",
        "evaluate/IP/seed1/pnc/base.tsv",
    ):
        (study / "benchmarks" / name).parent.mkdir(parents=True, exist_ok=True)
        (study / "benchmarks" / name).write_text("s\n1\n")
    manifest = tmp_path / "piece.json"
    pieces.write_manifest("IP", 1, [out], manifest, study_dir=study)
    pieces.store_piece(manifest, study, store)
    stored = sorted(p.relative_to(store / "benchmarks").as_posix()
                    for p in (store / "benchmarks").rglob("*.tsv"))  # fmt: skip
    assert stored == ["mechanism/IP/seed1.tsv"]
