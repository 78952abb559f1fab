"""Our Table 1 beside the paper's (pnc.report.compare): sources, cells, refusals, the check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from pnc.report import compare, export
from pnc.report.__main__ import main
from pnc.studies.mujoco.results_table import ResultsError

PAPER = Path(__file__).resolve().parents[1] / "docs" / "results" / "paper"


def test_printed_table1_holds_the_papers_printed_cells():
    printed = compare.read_printed(PAPER / compare.PRINTED_FILE)
    assert sorted(printed) == ["far/auroc", "far/nll", "far/spearman", "id/rmse"]
    assert all(len(cells) == 6 for cells in printed.values())
    # the column that does not follow from the appendix (docs/results/paper/README.md)
    assert printed["far/nll"]["pnc"] == compare.Cell(1.55, 1.21, 8, 11, None)
    assert printed["far/nll"]["subspace"].arrow == "up"
    assert printed["far/nll"]["deep_ensemble"].arrow is None
    assert printed["id/rmse"]["subspace"].mean_rank == 3.00
    assert sum(c.wins for c in printed["far/auroc"].values()) == 11


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f.drop(columns="wins"), "missing column"),
        (lambda f: f.assign(arrow=f["arrow"].where(f.index != 0, "left")), "arrow 'left'"),
        (lambda f: pd.concat([f, f.iloc[[0]]]), "listed twice"),
        (lambda f: f.assign(method=f["method"].where(f.index != 0, "pnc_nocorr")), "unknown"),
        (lambda f: f.assign(mean_rank=f["mean_rank"].where(f.index != 3, float("nan"))), "non-fin"),
    ],
)
def test_a_malformed_printed_table_is_refused(tmp_path, edit, message):
    frame = pd.read_csv(PAPER / compare.PRINTED_FILE, keep_default_na=False, dtype={"arrow": str})
    path = tmp_path / "printed.csv"
    edit(frame).to_csv(path, index=False)
    with pytest.raises(ResultsError, match=message):
        compare.read_printed(path)


def _folder_with_mixture(tmp_path: Path, factor: float) -> Path:
    """A reference-like folder: the paper's appendix means plus a Deep Ensemble mixture reading
    whose every value is the draws' value times ``factor``."""
    frame = pd.read_csv(PAPER / "results.csv")
    mixture = frame[frame.method == "deep_ensemble"].assign(method="deep_ensemble_mixture")
    mixture["value"] = mixture["value"] * factor
    folder = tmp_path / "ours"
    folder.mkdir()
    pd.concat([frame, mixture]).to_csv(folder / "results.csv", index=False)
    return folder


def test_the_mixture_column_ranks_the_mixture_reading_in_the_deep_ensembles_place(tmp_path):
    folder = _folder_with_mixture(tmp_path, factor=1e-3)  # far smaller RMSE than every method
    columns = dict(compare.comparison_columns(folder, PAPER))
    assert list(columns) == ["ours, draws", "ours, mixture", "paper, recomputed", "paper, printed"]
    # the draws are the paper's own numbers: that column equals the recomputed paper
    assert columns["ours, draws"] == columns["paper, recomputed"]
    mixture = columns["ours, mixture"]["id/rmse"]
    # P&C beats the mixture in no environment (``better``: a per-environment count)
    assert mixture["deep_ensemble"] == compare.Cell(1.0, 0.0, 11, 11, "down", better=0)
    assert mixture["pnc"].better is None
    assert columns["ours, draws"]["id/rmse"]["deep_ensemble"].mean_rank == pytest.approx(3.36, 1e-2)


def test_without_a_mixture_reading_there_is_no_mixture_column(tmp_path):
    folder = tmp_path / "ours"
    folder.mkdir()
    shutil.copyfile(PAPER / "results.csv", folder / "results.csv")
    labels = [label for label, _ in compare.comparison_columns(folder, PAPER)]
    assert labels == ["ours, draws", "paper, recomputed", "paper, printed"]


def test_markdown_bolds_each_columns_best_rank_and_prints_arrows():
    cell = compare.Cell
    column_a = {"id/rmse": {"pnc": cell(1.5, 0.5, 3, 4, None), "swag": cell(2.5, 0.5, 1, 4, "up")}}
    column_b = {
        "id/rmse": {"pnc": cell(2.0, 1.0, 1, 4, None), "swag": cell(1.0, 0.0, 3, 4, "down")}
    }
    text = compare.comparison_markdown([("a", column_a), ("b", column_b)])
    lines = text.strip().splitlines()
    assert lines[0] == "| Method | ID RMSE ↓, a | ID RMSE ↓, b |"
    assert lines[2] == "| SWAG | 2.50 ± 0.50 (1/4)↑ | **1.00 ± 0.00** (3/4)↓ |"
    assert lines[3] == "| P&C | **1.50 ± 0.50** (3/4) | 2.00 ± 1.00 (1/4) |"


def test_markdown_refuses_columns_that_rank_different_methods():
    cell = compare.Cell(1.0, 0.0, 1, 1, None)
    with pytest.raises(ValueError, match=r"b has no ID RMSE ↓ rank for \['swag'\]"):
        compare.comparison_markdown(
            [("a", {"id/rmse": {"pnc": cell, "swag": cell}}), ("b", {"id/rmse": {"pnc": cell}})]
        )
    with pytest.raises(ValueError, match="no columns"):
        compare.comparison_markdown([])


@pytest.mark.slow
def test_check_rebuilds_the_comparison_and_finds_an_edit(tmp_path, capsys):
    folder = _folder_with_mixture(tmp_path, factor=0.5)
    export.build_tables(folder, folder / "tables")
    assert main(["compare", str(folder), "--paper", str(PAPER)]) == 0
    assert export.check_folder(folder, PAPER) == []
    assert export.check_folder(folder) == [
        f"{folder / 'comparison.md'}: not checked (no paper folder given)"
    ]
    path = folder / "comparison.md"
    path.write_text(path.read_text().replace("(8/11)", "(9/11)", 1))
    capsys.readouterr()
    # the command prints each problem check_folder finds and fails
    assert main(["check", str(folder), "--paper", str(PAPER)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{path}: differs from the comparison rebuilt from the CSVs"
    ]


def test_per_environment_cells_put_our_seed_mean_beside_the_papers_mean():
    paper = pd.read_csv(PAPER / "results.csv")
    ours = paper[paper.env.isin(["Hopper", "Ant"])].copy()
    # two seeds of ours: the cell shows their mean
    second = ours.assign(seed=1)
    second.loc[(second.method == "pnc") & (second.metric == "auroc"), "value"] = 0.5
    ours = pd.concat([ours, second])
    text = compare.per_env_markdown(ours, paper, "far", "auroc", 3)
    lines = text.splitlines()
    assert (
        lines[0] == "| Environment | Deep Ensemble | MC Dropout | SWAG | Laplace | Subspace | P&C |"
    )
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| Ant", "| Hopper"]
    cells = lambda line: [c.strip() for c in line.strip("|").split("|")]  # noqa: E731
    hopper = dict(zip(cells(lines[0]), cells(lines[3]), strict=True))
    assert hopper["P&C"] == f"{(0.979 + 0.5) / 2:.3f} / 0.979"
    assert hopper["Deep Ensemble"] == "0.903 / 0.903"
    with pytest.raises(ValueError, match="no environment has Far AUROC"):
        compare.per_env_markdown(
            ours[ours.env == "Ant"], paper[paper.env == "Hopper"], "far", "auroc", 3
        )


def test_shift_ratio_divides_the_far_seed_mean_by_the_id_seed_mean():
    rows = []
    for env, id_rmse, far_rmse in (
        ("Hopper", (0.1, 0.3), (0.8, 1.2)),
        ("Ant", (0.5, 0.5), (1.0, 1.0)),
    ):
        for seed in (0, 1):
            for method in ("pnc", "deep_ensemble"):
                scale = 1.0 if method == "pnc" else 2.0
                rows.append((env, method, seed, "id", "rmse", id_rmse[seed]))
                rows.append((env, method, seed, "far", "rmse", scale * far_rmse[seed]))
    ours = pd.DataFrame(rows, columns=["env", "method", "seed", "split", "metric", "value"])
    lines = compare.shift_ratio_markdown(ours).splitlines()
    assert lines[0] == "| Environment | Deep Ensemble | P&C |"
    cells = lambda line: [c.strip() for c in line.strip("|").split("|")]  # noqa: E731
    # Hopper: mean Far 1.0 over mean ID 0.2 (not the mean of the per-seed ratios, 6.0)
    assert cells(lines[2]) == ["Hopper", "10.0", "5.00"]
    assert cells(lines[3]) == ["Ant", "4.00", "2.00"]
    with pytest.raises(ValueError, match="no environment has rmse on both"):
        compare.shift_ratio_markdown(ours[ours.split == "id"])
    zero = ours.copy()
    zero.loc[(zero.env == "Ant") & (zero.split == "id"), "value"] = 0.0
    with pytest.raises(ValueError, match="Ant, .*: Far/ID rmse is not a positive number"):
        compare.shift_ratio_markdown(zero)


def test_a_folder_without_far_rmse_says_so_in_place_of_the_ratio_table(tmp_path):
    folder = tmp_path / "ours"
    folder.mkdir()
    shutil.copyfile(PAPER / "results.csv", folder / "results.csv")  # the paper: ID RMSE only
    text = compare.comparison_text(folder, PAPER)
    section = text.split("### Far RMSE / ID RMSE per environment, ours")[1].split("## ")[0]
    assert section.strip().endswith("This folder has no Far RMSE.")


def _id_rmse(values: dict[str, dict[str, float]]) -> pd.DataFrame:
    """A results table of ID RMSE only: ``{env: {method: value}}``, seed 0."""
    return pd.DataFrame(
        [
            {"env": env, "method": m, "config": "c", "calibration": "raw", "seed": 0,
             "split": "id", "metric": "rmse", "value": v, "data_source": "offline"}
            for env, row in values.items() for m, v in row.items()
        ]
    )  # fmt: skip


def test_the_subspace_note_counts_where_subspace_beats_pnc_and_whether_its_rows_moved():
    ours = _id_rmse({"A": {"pnc": 1.0, "subspace": 2.0}, "B": {"pnc": 1.0, "subspace": 2.0}})
    variant = _id_rmse({"A": {"pnc": 3.0, "subspace": 2.0}, "B": {"pnc": 1.0, "subspace": 2.0}})
    note = compare.subspace_note(ours, variant, "authors' settings")
    assert note.startswith("Subspace's rows are identical in both folders")
    assert note.endswith(
        "Subspace's ID RMSE seed mean beats P&C's in 1 of 2 environments with the authors' "
        "settings and in 0 of 2 in ours."
    )
    moved = variant.copy()
    moved.loc[moved.method == "subspace", "value"] = 0.5
    note = compare.subspace_note(ours, moved, "authors' settings")
    assert note.startswith("Subspace's rows differ between the two folders;")
    assert "beats P&C's in 2 of 2 environments" in note


def test_the_calibration_pool_caveat_follows_the_variants_config(tmp_path, monkeypatch):
    assert "`calibration_pool: id_pool`" in compare.calibration_caveat(Path("offline_authors"))
    assert compare.calibration_caveat(Path("offline")) == ""  # the reference: the train split
    assert compare.calibration_caveat(tmp_path / "no_such_config") == ""
    monkeypatch.setattr(compare, "CONFIG_DIR", tmp_path)
    (tmp_path / "v.yaml").write_text("methods:\n  pnc:\n    calibration_pool: train\n")
    assert compare.calibration_caveat(Path("v")) == ""
