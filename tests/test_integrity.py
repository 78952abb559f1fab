"""Damaged artifacts fail loudly: cut or truncated metric tables, non-finite metrics, strict JSON
outputs, truncated or corrupted training runs and splits, each error naming the file."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from test_calibration import PNC_GRID, _evaluate, _write_splits, grid_table, study  # noqa: F401

from pnc.runtime.io import ArtifactError, read_json, rebuild_hint, write_csv, write_json
from pnc.studies.mujoco.selection import select_and_write

CALIBRATIONS = ("raw", "vcal")
PNC_TABLE = {"pnc": grid_table("pnc", PNC_GRID)}  # the methods' grid tables, as the workflow's


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def table(study, tmp_path_factory):  # noqa: F811
    """The evaluation table of the study's run, at its workflow path."""
    frame, _ = _evaluate(study)
    path = tmp_path_factory.mktemp("metrics") / "results/metrics/Toy/seed0/pnc/base.csv"
    write_csv(frame, path)
    return path


def _select(tmp_path, tables, **kwargs):
    return select_and_write(
        [str(t) for t in tables],
        seeds=[0],
        all_configs_path=str(tmp_path / "all_configs.csv"),
        results_path=str(tmp_path / "results.csv"),
        selection_path=str(tmp_path / "selection.json"),
        **kwargs,
    )


def _cut(source, target, n_rows):
    lines = source.read_text().splitlines(keepends=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines[: n_rows + 1]))
    return target


def test_complete_tables_select_and_write_strict_json(table, tmp_path):
    _select(tmp_path, [table], methods=PNC_TABLE, calibrations=CALIBRATIONS)
    record = _strict((tmp_path / "selection.json").read_text())
    assert record["Toy"]["pnc"]["finite"] is True
    assert all(isinstance(v, float) for v in record["Toy"]["pnc"]["candidates"].values())


@pytest.mark.parametrize("grid_known", [True, False])
def test_cut_table_fails_selection_naming_rows_and_file(table, tmp_path, grid_known):
    n = len(table.read_text().splitlines()) - 1
    cut = _cut(table, tmp_path / "results/metrics/Toy/seed0/pnc/base.csv", 14)
    kwargs = {"methods": PNC_TABLE, "calibrations": CALIBRATIONS} if grid_known else {}
    with pytest.raises(ArtifactError) as info:
        _select(tmp_path, [cut], **kwargs)
    message = str(info.value)
    assert str(cut) in message and "Toy seed 0 pnc" in message
    assert "snakemake --forcerun results/metrics/Toy/seed0/pnc/base.csv" in message
    if grid_known:  # every configuration of the grid: a cut at any line is found
        assert f"of {n // 4} rows" in message and "sigma" in message and "(vcal): all" in message
    assert not (tmp_path / "selection.json").exists()


def test_missing_configuration_is_found_from_the_grid(table, tmp_path):
    frame = pd.read_csv(table)
    config = frame["config"].iloc[0]
    path = tmp_path / "results/metrics/Toy/seed0/pnc/base.csv"
    write_csv(frame[frame["config"] != config], path)
    _select(tmp_path, [path])  # the tables alone cannot tell a whole configuration is gone
    with pytest.raises(ArtifactError) as info:
        _select(tmp_path, [path], methods=PNC_TABLE, calibrations=CALIBRATIONS)
    assert str(path) in str(info.value) and f"config {config!r} (raw): all" in str(info.value)
    other = {"pnc": grid_table("pnc", {**PNC_GRID, "grid": {"sigma": [2.0]}})}
    with pytest.raises(ArtifactError, match="not in the grid"):
        _select(tmp_path, [table], methods=other, calibrations=CALIBRATIONS)


def test_missing_table_is_named(table, tmp_path):
    with pytest.raises(ArtifactError, match=r"results/metrics/Toy/seed1/pnc/base.csv \(not among"):
        select_and_write(
            [str(table)],
            seeds=[0, 1],
            all_configs_path=str(tmp_path / "a.csv"),
            results_path=str(tmp_path / "r.csv"),
            selection_path=str(tmp_path / "s.json"),
            methods=PNC_TABLE,
            calibrations=CALIBRATIONS,
        )


def test_truncated_csv_names_the_file(table, tmp_path):
    text = table.read_text()
    path = tmp_path / "results/metrics/Toy/seed0/pnc/base.csv"
    path.parent.mkdir(parents=True)
    path.write_text(text[: len(text) // 2])  # mid-line
    with pytest.raises(ArtifactError, match=rf"{path} is truncated"):
        _select(tmp_path, [path])
    path.write_text(text[: len(text) // 2] + '"unterminated\n')
    with pytest.raises(ArtifactError, match=str(path)):
        _select(tmp_path, [path])
    path.write_text("")
    with pytest.raises(ArtifactError, match=rf"{path} is truncated \(empty\)"):
        _select(tmp_path, [path])


def test_non_finite_table_values_are_refused(table, tmp_path):
    frame = pd.read_csv(table)
    frame.loc[3, "value"] = np.nan
    path = tmp_path / "edited.csv"
    write_csv(frame, path)
    with pytest.raises(ArtifactError, match=rf"{path}: 1 non-finite value"):
        _select(tmp_path, [path])


def test_aggregate_names_cut_outputs(table, tmp_path):
    from pnc.studies.mujoco.selection import concatenate_outputs

    _select(tmp_path, [table])
    out = tmp_path / "out"
    files = [tmp_path / n for n in ("all_configs.csv", "results.csv", "selection.json")]
    concatenate_outputs([files[0]], [files[1]], [files[2]], out)
    assert _strict((out / "selection.json").read_text()).keys() == {"Toy"}
    cut = _cut(files[1], tmp_path / "cut/results.csv", 3)
    with pytest.raises(ArtifactError, match="results.csv lacks"):
        concatenate_outputs([files[0]], [cut], [files[2]], out)
    half = tmp_path / "cut/selection.json"
    half.write_text(files[2].read_text()[:40])
    with pytest.raises(ArtifactError, match=rf"{half} is not valid JSON"):
        concatenate_outputs([files[0]], [files[1]], [half], out)


def test_nan_in_a_split_fails_the_evaluation_naming_config_and_split(study, tmp_path):  # noqa: F811
    from pnc.studies.mujoco.stages import NonFiniteMetricError, load_split_arrays

    splits, _ = load_split_arrays(study / "splits")
    x, y = splits["near"]
    y = y.copy()
    y[3, 0] = np.nan
    _write_splits(study / "nan_near", {**splits, "near": (x, y)})
    with pytest.raises(NonFiniteMetricError) as info:
        _evaluate(study, data="nan_near")
    message = str(info.value)
    assert "configuration 'sigma" in message and "calibration 'raw'" in message
    assert "split 'near': " in message and "nll=nan" in message and "rmse=nan" in message
    assert "'val'" not in message and "'far'" not in message
    assert "targets hold non-finite values" in message and "nan_near" in message


def test_json_outputs_are_strict(tmp_path):
    write_json(tmp_path / "ok.json", {"a": [1.0, None], "b": np.float64(2.0)})
    assert _strict((tmp_path / "ok.json").read_text()) == {"a": [1.0, None], "b": 2.0}
    for bad, where in (({"a": {"b": [0.0, math.nan]}}, "a.b.1"), ({"c": np.inf}, "c")):
        with pytest.raises(ValueError, match=rf"bad.json: non-finite number at {where}"):
            write_json(tmp_path / "bad.json", bad)
    assert not (tmp_path / "bad.json").exists()
    (tmp_path / "nan.json").write_text('{"a": NaN}')
    with pytest.raises(ArtifactError, match="nan.json is not valid JSON"):
        read_json(tmp_path / "nan.json")


def test_selection_record_writes_non_finite_as_null(tmp_path):
    from pnc.studies.mujoco.results import RESULT_COLUMNS
    from pnc.studies.mujoco.selection import select

    rows = [
        ("Hopper", "swag", c, "raw", 0, s, "nll", v, "offline")
        for c, v in (("a", math.nan), ("b", math.inf), ("c", 2.0))
        for s in ("val", "id")
    ]
    record = select(pd.DataFrame(rows, columns=list(RESULT_COLUMNS)))
    write_json(tmp_path / "s.json", record)
    rec = _strict((tmp_path / "s.json").read_text())["Hopper"]["swag"]
    assert rec["config"] == "c" and rec["finite"] is True and rec["val_nll"] == 2.0
    assert rec["candidates"] == {"a|raw": None, "b|raw": None, "c|raw": 2.0}


@pytest.fixture
def run_copy(study, tmp_path):  # noqa: F811
    """A copy of the study's run at its workflow path."""
    target = tmp_path / "results/runs/Toy/seed0/base"
    target.mkdir(parents=True)
    for name in ("run.json", "run.msgpack"):
        (target / name).write_bytes((study / "run" / name).read_bytes())
    return target


def test_run_records_and_verifies_its_checksum(run_copy):
    from pnc.methods.regression.runs import TrainingRun
    from pnc.runtime.io import file_sha256

    info = json.loads((run_copy / "run.json").read_text())
    assert info["msgpack_sha256"] == file_sha256(run_copy / "run.msgpack")
    TrainingRun.load(run_copy)


def test_truncated_run_names_the_file(run_copy):
    from pnc.methods.regression.runs import TrainingRun

    data = (run_copy / "run.msgpack").read_bytes()
    (run_copy / "run.msgpack").write_bytes(data[: len(data) // 2])
    hint = "snakemake --forcerun results/runs/Toy/seed0/base/run.json"
    with pytest.raises(ArtifactError, match=rf"{run_copy / 'run.msgpack'} does not match") as info:
        TrainingRun.load(run_copy)
    assert hint in str(info.value)
    # without a recorded checksum the parse error names the file
    info = json.loads((run_copy / "run.json").read_text())
    del info["msgpack_sha256"]
    (run_copy / "run.json").write_text(json.dumps(info))
    with pytest.raises(ArtifactError, match=rf"{run_copy / 'run.msgpack'} is truncated or corrupt"):
        TrainingRun.load(run_copy)


def test_corrupted_run_of_same_length_fails_the_checksum(run_copy):
    from pnc.methods.regression.runs import TrainingRun

    data = bytearray((run_copy / "run.msgpack").read_bytes())
    for i in range(len(data) - 40, len(data) - 8):
        data[i] ^= 0xFF
    (run_copy / "run.msgpack").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=rf"{run_copy / 'run.msgpack'} does not match the SHA"):
        TrainingRun.load(run_copy)


def test_truncated_run_json_names_the_file(run_copy):
    from pnc.methods.regression.runs import TrainingRun

    text = (run_copy / "run.json").read_text()
    (run_copy / "run.json").write_text(text[: len(text) // 2])
    with pytest.raises(ArtifactError, match=rf"{run_copy / 'run.json'} is not valid JSON"):
        TrainingRun.load(run_copy)


def test_damaged_splits_name_the_directory_and_the_rebuild(study, tmp_path):  # noqa: F811
    from pnc.studies.mujoco.stages import load_split_arrays

    target = tmp_path / "resources/splits/Toy/seed0"
    target.mkdir(parents=True)
    for name in ("splits.npz", "manifest.json"):
        (target / name).write_bytes((study / "splits" / name).read_bytes())
    data = (target / "splits.npz").read_bytes()
    (target / "splits.npz").write_bytes(data[: len(data) // 2])
    hint = "snakemake --forcerun resources/splits/Toy/seed0/manifest.json"
    with pytest.raises(ValueError, match="does not match the hash") as info:
        load_split_arrays(target)
    assert hint in str(info.value) and str(target) in str(info.value)
    (target / "splits.npz").write_bytes(data)
    (target / "manifest.json").write_text("{")
    with pytest.raises(ArtifactError, match=str(target)) as info:
        load_split_arrays(target)
    assert hint in str(info.value)


def test_rebuild_hints():
    assert rebuild_hint("x/results/runs/E/seed1/base/run.msgpack").endswith(
        "snakemake --forcerun results/runs/E/seed1/base/run.json"
    )
    assert rebuild_hint("/a/resources/splits/E/seed2").endswith(
        "resources/splits/E/seed2/manifest.json"
    )
    assert rebuild_hint("results/envs/E/results.csv").endswith(
        "--forcerun results/envs/E/results.csv"
    )


def test_checked_run_round_trip_and_tampering(tmp_path, caplog):
    """pnc.runtime.io's run pair, shared by the MuJoCo TrainingRun and the CIFAR TrainedNetwork: the hash
    of the bytes written is recorded (a stale one replaced), a changed byte is refused naming both
    files, and a record without a hash is read with a log line."""
    import logging

    from pnc.runtime.io import RUN_SHA256_KEY, file_sha256, load_checked_run, save_checked_run

    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.int32(4)}
    save_checked_run(tmp_path, tree, {"seed": 3, RUN_SHA256_KEY: "stale"})
    record = read_json(tmp_path / "run.json")
    assert record == {"seed": 3, RUN_SHA256_KEY: file_sha256(tmp_path / "run.msgpack")}
    loaded, info = load_checked_run(tmp_path)
    np.testing.assert_array_equal(np.asarray(loaded["w"]), tree["w"])
    assert int(loaded["n"]) == 4 and info == record

    data = bytearray((tmp_path / "run.msgpack").read_bytes())
    data[-1] ^= 1
    (tmp_path / "run.msgpack").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"run\.msgpack does not match .*run\.json"):
        load_checked_run(tmp_path)

    del record[RUN_SHA256_KEY]
    write_json(tmp_path / "run.json", record)
    with caplog.at_level(logging.INFO, logger="pnc.runtime.io"):
        loaded, info = load_checked_run(tmp_path)
    assert info == {"seed": 3} and "read unchecked" in caplog.text

    (tmp_path / "run.msgpack").unlink()
    with pytest.raises(FileNotFoundError, match=r"run\.msgpack not found"):
        load_checked_run(tmp_path)
