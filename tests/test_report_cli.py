"""``python -m pnc.report``: the tables, frontier and metrics subcommands and their errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from synthetic_results import make_results

from pnc.report.__main__ import main


@pytest.fixture(scope="module")
def tables():
    return make_results(envs=("Ant-v5", "Swimmer-v5"), seeds=(0, 1))


@pytest.mark.slow
def test_tables_single_seed_per_env(tmp_path):
    results, _ = make_results(envs=("A", "B"), no_mid=("B",), seeds=(7,))
    path = tmp_path / "results.csv"
    results.to_csv(path, index=False)
    assert main(["tables", str(path), "--out", str(tmp_path / "out")]) == 0
    out = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert out["seeds"] == {"A": 1, "B": 1}
    assert all(r["std"] is None and r["n_seeds"] == 1 for r in out["summary"])
    per_env = (tmp_path / "out" / "per_env.md").read_text()
    assert "±" not in per_env.split("\n", 2)[2]  # cells show the mean only
    assert "single seed" in per_env.split("\n", 1)[0]
    # two environments: the Holm note replaces arrows
    assert "no comparison can be significant" in (tmp_path / "out" / "cross_env.md").read_text()
    for name in ("cross_env", "wilcoxon", "hparams", "per_env", "spearman"):
        for ext in ("tex", "md", "csv"):
            assert (tmp_path / "out" / f"{name}.{ext}").is_file()


def test_tables_reports_bad_input(tmp_path, capsys):
    results, _ = make_results(envs=("A", "B"), no_mid=("B",), seeds=(0, 1))
    path = tmp_path / "bad.csv"
    results.assign(value=np.where(results.index == 0, np.nan, results.value)).to_csv(path)
    assert main(["tables", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "non-finite" in capsys.readouterr().err
    assert main(["tables", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "out")]) == 2
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tables", str(path), "--out", str(tmp_path / "out"), "--alpha", "1.5"])


def test_figure_errors_and_outputs(tmp_path, capsys, tables):
    results, raw = tables
    path = tmp_path / "results.csv"
    results.to_csv(path, index=False)
    assert main(["metrics", str(path), "--out", str(tmp_path / "m"), "--env", "Nope-v5"]) == 2
    assert "Nope-v5" in capsys.readouterr().err
    assert main(["metrics", str(path), "--out", str(tmp_path / "m")]) == 2
    assert "exactly one --env" in capsys.readouterr().err
    # results.csv has no 'selected' column: the frontier needs all_configs.csv
    assert main(["frontier", str(path), "--out", str(tmp_path / "f")]) == 2
    assert "selected" in capsys.readouterr().err
    cfg = tmp_path / "all_configs.csv"
    raw.to_csv(cfg, index=False)
    assert main(["frontier", str(cfg), "--out", str(tmp_path / "f"), "--env", "Ant-v5"]) == 0
    assert (tmp_path / "f.png").is_file() and (tmp_path / "f.pdf").is_file()
    assert main(["metrics", str(path), "--out", str(tmp_path / "m"), "--env", "Ant-v5"]) == 0
    assert (tmp_path / "m.png").is_file() and (tmp_path / "m.pdf").is_file()


def test_stats_imports_neither_tables_nor_figures():
    code = (
        "import sys, pnc.report.stats; "
        "print(sorted(m for m in sys.modules if m.startswith('pnc.report') or m == 'matplotlib'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['pnc.report', 'pnc.report.stats']"


@pytest.mark.slow
def test_tables_from_a_table_without_calibration_column(tmp_path):
    results, _ = make_results(envs=("A", "B"), no_mid=("B",), seeds=(0, 1), calibrations=("raw",))
    path = tmp_path / "results.csv"
    results.drop(columns="calibration").to_csv(path, index=False)
    assert main(["tables", str(path), "--out", str(tmp_path / "out")]) == 0
    out = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert {r["calibration"] for r in out["summary"]} == {"raw"}
    assert "vcal" not in (tmp_path / "out" / "hparams.md").read_text()


@pytest.mark.slow
def test_selected_calibration_reaches_tables_and_frontier(tmp_path, capsys, tables):
    results, raw = tables
    path = tmp_path / "results.csv"
    results.to_csv(path, index=False)
    assert main(["tables", str(path), "--out", str(tmp_path / "out")]) == 0
    out = json.loads((tmp_path / "out" / "stats.json").read_text())
    chosen = {(r["method"], r["calibration"]) for r in out["summary"]}
    assert ("swag", "vcal") in chosen and ("pnc", "raw") in chosen
    assert "+ vcal" in (tmp_path / "out" / "hparams.md").read_text()
    # the frontier chooses each configuration's variant on the val rows of all_configs.csv
    cfg = tmp_path / "all_configs.csv"
    raw[raw.split != "val"].to_csv(cfg, index=False)
    assert main(["frontier", str(cfg), "--out", str(tmp_path / "f")]) == 2
    assert "val rows" in capsys.readouterr().err


@pytest.mark.slow
def test_substitute_ranks_the_mixture_reading_in_place_of_the_draws(tmp_path, capsys):
    """``--substitute deep_ensemble=deep_ensemble_mixture``: the tables rank the mixture reading's
    values under the Deep Ensemble, say so in the caption, and bad pairs exit with status 2."""
    results, _ = make_results(envs=("A", "B", "C"), no_mid=("C",), seeds=(0, 1))
    path = tmp_path / "results.csv"
    results.to_csv(path, index=False)
    assert main(["tables", str(path), "--out", str(tmp_path / "draws")]) == 0
    assert (
        main(
            ["tables", str(path), "--out", str(tmp_path / "mix")]
            + ["--substitute", "deep_ensemble=deep_ensemble_mixture"]
        )
        == 0
    )
    draws = json.loads((tmp_path / "draws" / "stats.json").read_text())
    mix = json.loads((tmp_path / "mix" / "stats.json").read_text())
    assert mix["substitutions"] == {"deep_ensemble": "deep_ensemble_mixture"}
    assert "substitutions" not in draws
    assert "deep_ensemble_mixture" not in mix["methods"]

    def means(stats, method):
        return {
            (r["env"], r["split"], r["metric"]): r["mean"]
            for r in stats["summary"]
            if r["method"] == method
        }

    assert means(mix, "deep_ensemble") == means(draws, "deep_ensemble_mixture")
    assert means(mix, "deep_ensemble") != means(draws, "deep_ensemble")
    assert means(mix, "pnc") == means(draws, "pnc")
    caption = (tmp_path / "mix" / "cross_env.md").read_text().split("\n", 1)[0]
    assert "Deep Ensemble: the values of Deep Ensemble (mixture)." in caption
    assert "Not ranked: P&C w/o Corr." in caption
    assert "Not ranked: P&C w/o Corr, Deep Ensemble (mixture)." in (
        (tmp_path / "draws" / "cross_env.md").read_text()
    )
    capsys.readouterr()
    for bad in ("deep_ensemble", "deep_ensemble=nope", "pnc=pnc", "a=b=c"):
        assert main(["tables", str(path), "--out", str(tmp_path / "x"), "--substitute", bad]) == 2
        assert "error:" in capsys.readouterr().err
