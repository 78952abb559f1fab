"""Reference-results folders: export a study, rebuild its tables, refuse incomplete results."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from synthetic_results import make_results

from pnc.report import export
from pnc.report.__main__ import main
from pnc.studies.mujoco.results_table import ResultsError


def _study(tmp_path: Path, **kwargs) -> Path:
    study = tmp_path / "study"
    (study / "results").mkdir(parents=True)
    results, all_configs = make_results(**kwargs)
    results.to_csv(study / "results" / "results.csv", index=False)
    all_configs.to_csv(study / "results" / "all_configs.csv", index=False)
    (study / "results" / "selection.json").write_text(json.dumps({"made": "synthetic"}))
    (study / "figures" / "frontier").mkdir(parents=True)
    (study / "figures" / "frontier" / "Ant-v5.png").write_bytes(b"\x89PNG fake")
    return study


@pytest.mark.slow
def test_export_then_check_round_trip(tmp_path, capsys):
    study = _study(tmp_path)
    out = tmp_path / "ref"
    assert main(["export", str(study), "--out", str(out)]) == 0
    for name in ("results.csv", "all_configs.csv", "selection.json", "tables/cross_env.md"):
        assert (out / name).is_file(), name
    assert (out / "figures" / "frontier" / "Ant-v5.png").read_bytes() == b"\x89PNG fake"
    assert main(["check", str(out)]) == 0
    # a hand-edited table is caught, naming the file
    table = out / "tables" / "cross_env.md"
    table.write_text(table.read_text().replace("P&C", "PnC", 1))
    assert main(["check", str(out)]) == 1
    assert "cross_env.md: differs" in capsys.readouterr().err
    # an existing folder is not overwritten without --force
    assert main(["export", str(study), "--out", str(out)]) == 2
    assert main(["export", str(study), "--out", str(out), "--force"]) == 0
    assert main(["check", str(out)]) == 0


@pytest.mark.slow
def test_check_names_a_missing_and_an_unexpected_table(tmp_path):
    out = tmp_path / "ref"
    export.export_study(_study(tmp_path), out)
    (out / "tables" / "spearman.md").unlink()
    (out / "tables" / "stale.md").write_text("old")
    problems = export.check_folder(out)
    assert any("spearman.md: missing" in p for p in problems)
    assert any("stale.md: not built" in p for p in problems)


def test_missing_seed_of_one_method_is_refused_by_name(tmp_path):
    study = _study(tmp_path)
    path = study / "results" / "results.csv"
    import pandas as pd

    frame = pd.read_csv(path)
    drop = (frame.env == "Hopper-v5") & (frame.method == "swag") & (frame.seed == 2)
    frame[~drop].to_csv(path, index=False)
    with pytest.raises(ResultsError, match=r"missing env=Hopper-v5, method=swag, seed\(s\) \[2\]"):
        export.export_study(study, tmp_path / "ref")
    assert not (tmp_path / "ref").exists()


def test_missing_method_in_one_env_is_refused(tmp_path):
    results, _ = make_results()
    frame = results[~((results.env == "Ant-v5") & (results.method == "laplace"))]
    with pytest.raises(ResultsError, match=r"env=Ant-v5, method=laplace, seed\(s\) \[0, 1, 2\]"):
        export.check_complete(frame)


def test_non_finite_value_is_refused(tmp_path):
    results, _ = make_results()
    results.loc[results.index[5], "value"] = np.inf
    row = results.loc[results.index[5]]
    with pytest.raises(ResultsError, match=f"non-finite value inf at env={row.env}"):
        export.check_complete(results)


def test_complete_results_give_their_seeds():
    results, _ = make_results(seeds=(0, 1, 2, 3))
    assert export.check_complete(results) == {e: [0, 1, 2, 3] for e in results.env.unique()}
