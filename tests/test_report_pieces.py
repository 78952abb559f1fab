"""Pieces of a long study: one (env, seed)'s small outputs listed, stored and restored, hash-checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pnc.report import pieces
from pnc.report.__main__ import main
from pnc.runtime import compile_cache
from pnc.runtime.io import file_sha256

FILES = (
    "results/metrics/Hopper/seed3/pnc/base.csv",
    "results/metrics/Hopper/seed3/deep_ensemble/deep_ensemble-n_members5.csv",
    "results/mechanism/Hopper/seed3.parquet",
)
BENCHMARKS = (
    "benchmarks/train/Hopper/seed3/base.tsv",
    "benchmarks/evaluate/Hopper/seed3/pnc/base.tsv",
    "benchmarks/far_data/Hopper/seed3.tsv",
    "benchmarks/offline_data/Hopper.tsv",  # once per environment: stored with every piece
)
OTHER = (  # files of other pieces, never taken
    "results/metrics/Hopper/seed4/pnc/base.csv",
    "benchmarks/train/Hopper/seed4/base.tsv",
    "benchmarks/train/Ant/seed3/base.tsv",
    "benchmarks/evaluate/Hopper/seed30/pnc/base.tsv",
    "benchmarks/offline_data/Ant.tsv",
)


def _study(root: Path) -> Path:
    for i, rel in enumerate(FILES + BENCHMARKS + OTHER):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"content {i} of {rel}\n")
    return root


def test_piece_round_trip(tmp_path, monkeypatch, caplog):
    study = _study(tmp_path / "study")
    monkeypatch.chdir(study)
    manifest = pieces.write_manifest("Hopper", 3, list(FILES), "results/pieces/Hopper/seed3.json")
    assert manifest["env"] == "Hopper" and manifest["seed"] == 3
    # the machine that wrote it, by CPU kind
    assert manifest["host"] == {"tag": compile_cache.host_tag(), "cpu": compile_cache.cpu_name()}
    assert (
        json.loads(Path("results/pieces/Hopper/seed3.json").read_text())["host"] == manifest["host"]
    )
    assert sorted(manifest["files"]) == sorted(FILES)
    first = manifest["files"][FILES[0]]
    assert first["sha256"] == file_sha256(FILES[0]) and first["bytes"] > 0

    store = tmp_path / "store"
    written = pieces.store_piece("results/pieces/Hopper/seed3.json", study, store)
    rel = sorted(p.relative_to(store).as_posix() for p in written)
    assert rel == sorted([*FILES, *BENCHMARKS, "manifests/Hopper/seed3.json"])
    assert pieces.stored_pieces(store) == [("Hopper", 3)]
    # storing again writes nothing; the store is unchanged
    assert pieces.store_piece("results/pieces/Hopper/seed3.json", study, store) == []

    fresh = tmp_path / "fresh"
    restored = pieces.restore_pieces(store, fresh)
    assert sorted(p.relative_to(fresh).as_posix() for p in restored) == sorted(FILES + BENCHMARKS)
    for name in FILES + BENCHMARKS:
        assert (fresh / name).read_bytes() == (study / name).read_bytes()
    assert not (fresh / OTHER[0]).exists()
    assert pieces.restore_pieces(store, fresh) == []

    # a job of the restored study ran again (the mechanism stage remakes its seed's data): its
    # benchmark is replaced by the stored one, with a warning; a changed metric table is refused
    rerun = fresh / BENCHMARKS[2]
    rerun.write_text("measured again\n")
    with caplog.at_level("WARNING", logger=pieces.log.name):
        assert pieces.restore_pieces(store, fresh) == [rerun]
    assert rerun.read_bytes() == (study / BENCHMARKS[2]).read_bytes()
    assert "replaced this study's measurement" in caplog.text
    (fresh / FILES[0]).write_text("a different result\n")
    with pytest.raises(pieces.PieceError, match="different content; refusing"):
        pieces.restore_pieces(store, fresh)
    assert (fresh / FILES[0]).read_text() == "a different result\n"


def test_piece_refuses_missing_changed_and_conflicting_files(tmp_path, monkeypatch):
    study = _study(tmp_path / "study")
    monkeypatch.chdir(study)
    with pytest.raises(pieces.PieceError, match="no files"):
        pieces.write_manifest("Hopper", 3, [], "m.json")
    with pytest.raises(pieces.PieceError, match="seed9.parquet does not exist"):
        pieces.write_manifest("Hopper", 3, ["results/mechanism/Hopper/seed9.parquet"], "m.json")
    outside = tmp_path / "outside.csv"
    outside.write_text("x")
    with pytest.raises(pieces.PieceError, match="not inside the study"):
        pieces.write_manifest("Hopper", 3, [str(outside)], "m.json")

    pieces.write_manifest("Hopper", 3, list(FILES), "m.json")
    store = tmp_path / "store"
    (study / FILES[0]).write_text("changed after the manifest\n")
    with pytest.raises(pieces.PieceError, match="changed since its manifest"):
        pieces.store_piece("m.json", study, store)
    pieces.write_manifest("Hopper", 3, list(FILES), "m.json")
    pieces.store_piece("m.json", study, store)
    # a re-run that produced different bytes never overwrites the stored piece
    (study / FILES[0]).write_text("a second, different result\n")
    pieces.write_manifest("Hopper", 3, list(FILES), "m.json")
    with pytest.raises(pieces.PieceError, match="different content; refusing"):
        pieces.store_piece("m.json", study, store)
    assert (store / FILES[0]).read_text() == "changed after the manifest\n"

    # a stored file edited by hand fails the restore, naming its manifest
    (store / FILES[1]).write_text("edited\n")
    with pytest.raises(pieces.PieceError, match="changed since its manifest"):
        pieces.restore_pieces(store, tmp_path / "fresh")
    (store / FILES[1]).unlink()
    with pytest.raises(pieces.PieceError, match="is missing"):
        pieces.restore_pieces(store, tmp_path / "fresh2")
    with pytest.raises(pieces.PieceError, match="holds no pieces"):
        pieces.restore_pieces(tmp_path / "empty", tmp_path / "fresh3")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"env": "Hopper"}))
    with pytest.raises(pieces.PieceError, match="not a piece manifest"):
        pieces.read_manifest(bad)


def test_piece_command_line(tmp_path, monkeypatch, capsys):
    study = _study(tmp_path / "study")
    monkeypatch.chdir(study)
    out = "results/pieces/Hopper/seed3.json"
    assert main(["piece", "Hopper", "3", *FILES, "--out", out]) == 0
    store = tmp_path / "store"
    assert main(["store-piece", out, "--store", str(store)]) == 0
    assert "8 file(s) stored" in capsys.readouterr().out
    assert main(["restore-pieces", str(store), "--study", str(tmp_path / "fresh")]) == 0
    assert "7 file(s) restored" in capsys.readouterr().out
    assert main(["piece", "Hopper", "3", "results/nope.csv", "--out", out]) == 2
    assert "results/nope.csv does not exist" in capsys.readouterr().err


def test_piece_keeps_each_jobs_exact_process_record(tmp_path, monkeypatch):
    """A job whose log ends with its process record gets ``X.process.json`` beside its benchmark
    file in the store (a job without one gets none); it is restored, read back by the cost
    summary in place of the sampled CPU time, and never overwritten with a different record."""
    from pnc.report import costs
    from pnc.runtime.io import PROCESS_RECORD

    study = _study(tmp_path / "study")
    header = "s\tcpu_time\tmax_rss\n"
    for rel in BENCHMARKS:
        (study / rel).write_text(header + "20.0\t5.0\t100\n")
    record = {"cpu_s": 17.25, "max_rss_mb": 812.5, "stage": "evaluate_run", "status": 0}
    log = study / "logs/evaluate/Hopper/seed3/pnc/base.log"
    log.parent.mkdir(parents=True)
    log.write_text("progress\n" + PROCESS_RECORD + json.dumps(record) + "\n")
    (study / "logs/train/Hopper/seed3").mkdir(parents=True)
    (study / "logs/train/Hopper/seed3/base.log").write_text("killed before its record\n")
    monkeypatch.chdir(study)
    pieces.write_manifest("Hopper", 3, list(FILES), "results/pieces/Hopper/seed3.json")
    store = tmp_path / "store"
    written = pieces.store_piece("results/pieces/Hopper/seed3.json", study, store)
    sidecar = "benchmarks/evaluate/Hopper/seed3/pnc/base.process.json"
    assert sidecar in {p.relative_to(store).as_posix() for p in written}
    assert json.loads((store / sidecar).read_text()) == record
    assert not list(store.glob("benchmarks/train/**/*.process.json"))

    fresh = tmp_path / "fresh"
    pieces.restore_pieces(store, fresh)
    df = costs.read_benchmarks(fresh / "benchmarks").set_index("job")
    assert df.loc["evaluate/Hopper/seed3/pnc/base", ["cpu_s", "max_rss_mb"]].tolist() == [
        17.25,
        812.5,
    ]
    assert df.loc["train/Hopper/seed3/base", ["cpu_s", "cpu_source"]].tolist() == [5.0, "sampled"]

    log.write_text(PROCESS_RECORD + json.dumps({**record, "cpu_s": 99.0}) + "\n")
    with pytest.raises(pieces.PieceError, match="base.process.json"):
        pieces.store_piece("results/pieces/Hopper/seed3.json", study, store)


def test_an_environments_data_job_measured_again_keeps_its_stored_benchmark(
    tmp_path, monkeypatch, caplog
):
    """A later piece from a fresh checkout ran the environment's once-per-environment data job
    again: its benchmark differs, the stored one (the first measurement) stays, with a warning;
    a benchmark of the (env, seed)'s own jobs that differs is still refused."""
    import logging

    study = _study(tmp_path / "study")
    monkeypatch.chdir(study)
    store = tmp_path / "store"
    pieces.write_manifest("Hopper", 3, list(FILES), "m3.json")
    pieces.store_piece("m3.json", study, store)
    env_job = "benchmarks/offline_data/Hopper.tsv"
    first = (store / env_job).read_text()

    # seed 4 on a fresh checkout: the data job ran again and took another time
    seed4 = ("results/metrics/Hopper/seed4/pnc/base.csv",)
    (study / env_job).write_text("s\t99.0\n")
    (study / "benchmarks/train/Hopper/seed4/base.tsv").write_text("seed 4 training\n")
    pieces.write_manifest("Hopper", 4, list(seed4), "m4.json")
    with caplog.at_level(logging.WARNING, logger="pnc.report.pieces"):
        written = pieces.store_piece("m4.json", study, store)
    assert (store / env_job).read_text() == first
    assert "kept the stored benchmark of Hopper's data job" in caplog.text
    rel = sorted(p.relative_to(store).as_posix() for p in written)
    own = ["benchmarks/train/Hopper/seed4/base.tsv", "manifests/Hopper/seed4.json"]
    assert rel == sorted([*seed4, *own])

    # a different benchmark of the (env, seed)'s own job is still refused
    (study / "benchmarks/train/Hopper/seed4/base.tsv").write_text("measured differently\n")
    with pytest.raises(pieces.PieceError, match=r"seed4/base\.tsv exists with different content"):
        pieces.store_piece("m4.json", study, store)
