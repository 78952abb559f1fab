"""The pieces of a long study: each (env, seed)'s small outputs, stored as soon as they exist.

A study of 11 environments x 10 seeds takes days of CPU time, often over several machines and
checkouts. Its final tables need only small files per (env, seed): the long-format metric table
of every (method, run) (``results/metrics/{env}/seed{S}/...csv``), the mechanism table of the seeds
the mechanism stage runs on (``results/mechanism/{env}/seed{S}.parquet``) and the Snakemake
benchmark files of its jobs (for the cost summary). A *piece* is those files of one (env, seed):

- the workflow's ``piece`` rule lists them, with their SHA-256 and sizes, in
  ``results/pieces/{env}/seed{S}.json`` (:func:`write_manifest`) once every one of them exists;
- :func:`store_piece` copies them, the benchmark files of the (env, seed)'s jobs (with, beside
  each, ``X.process.json``: the exact CPU time and peak memory the job recorded at the end of its
  log, :data:`pnc.runtime.io.PROCESS_RECORD`) and the manifest into a store (``docs/results/offline/pieces/``), keeping their paths relative to the study, after
  checking every hash, and refuses to overwrite a stored file with different content;
- :func:`restore_pieces` copies a store's files back into a study directory, hash-checked, so that
  the selection and tables can be rebuilt on a machine where the runs never ran.

Command line::

    python -m pnc.report piece ENV SEED FILE... --out results/pieces/ENV/seedS.json
    python -m pnc.report store-piece results/pieces/ENV/seedS.json --study . --store DIR
    python -m pnc.report restore-pieces DIR --study STUDY_DIR [--skip-methods pnc pnc_nocorr]
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pnc.runtime.compile_cache import cpu_name, host_tag
from pnc.runtime.io import file_sha256, read_process_record, write_json

log = logging.getLogger(__name__)

#: Sub-directory of a store holding the manifests (``manifests/{env}/seed{S}.json``).
MANIFESTS = "manifests"

#: The folders of an (env, seed)'s metric tables in a study (``{env}``, ``{seed}``), by layout:
#: ``metrics``, the ``full`` evaluation's (the stored pieces'), and the two-phase evaluation's
#: ``validation`` phase, both one folder per method holding one table per training run; the
#: ``test`` phase's, one table per method.
TABLE_DIRS: dict[str, str] = {
    "metrics": "results/metrics/{env}/seed{seed}",
    "validation": "results/validation/{env}/seed{seed}",
    "test": "results/test/{env}/seed{seed}",
}

#: The layouts of :data:`TABLE_DIRS` whose tables are one per (method, training run).
PER_RUN_TABLES: tuple[str, ...] = ("metrics", "validation")


def table_layout(path: str | Path) -> str | None:
    """The layout (a key of :data:`TABLE_DIRS`) of a metric table given by its path relative to a
    study, ``results/{layout}/{env}/seed{S}/...``; ``None`` for any other file."""
    parts = Path(path).parts
    if len(parts) >= 5 and parts[0] == "results" and parts[1] in TABLE_DIRS:
        return parts[1]
    return None


class PieceError(ValueError):
    """A piece whose files are missing, changed, or would overwrite different stored files."""


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise PieceError(f"{path} is not inside the study directory {root}") from None


def write_manifest(
    env: str,
    seed: int,
    files: Sequence[str | Path],
    out: str | Path,
    *,
    study_dir: str | Path = ".",
) -> dict[str, Any]:
    """Write the manifest of the (env, seed) piece made of ``files``.

    Args:
        env: environment name.
        seed: seed index.
        files: the piece's output files (paths inside ``study_dir``).
        out: the manifest JSON to write.
        study_dir: the study directory the paths are relative to.

    Returns:
        The manifest: ``env``, ``seed``, ``files`` (``{relative path: {"sha256", "bytes"}}``) and
        ``host``, the machine that wrote it (``{"tag": pnc.runtime.compile_cache.host_tag(), "cpu":
        pnc.runtime.compile_cache.cpu_name()}``): pieces of one tag were made on one CPU kind, whose
        results can differ in the last bits from another's (``docs/results.md``, "What
        reproduces where"). Manifests written before it was recorded have no ``host``.

    Raises:
        PieceError: no files, a missing file, or a file outside ``study_dir``.
    """
    root = Path(study_dir)
    if not files:
        raise PieceError(f"piece ({env}, seed {seed}) has no files")
    entries: dict[str, dict[str, Any]] = {}
    for name in files:
        path = Path(name)
        if not path.is_file():
            raise PieceError(f"piece ({env}, seed {seed}): {path} does not exist")
        entries[_relative(path, root)] = {"sha256": file_sha256(path), "bytes": path.stat().st_size}
    manifest = {
        "env": env,
        "seed": int(seed),
        "files": dict(sorted(entries.items())),
        "host": {"tag": host_tag(), "cpu": cpu_name()},
    }
    write_json(Path(out), manifest)
    return manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    """A manifest written by :func:`write_manifest`.

    Raises:
        PieceError: the file is not such a manifest.
    """
    try:
        manifest = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise PieceError(f"cannot read manifest {path}: {err}") from None
    if not isinstance(manifest, dict) or not {"env", "seed", "files"} <= set(manifest):
        raise PieceError(f"{path} is not a piece manifest (needs env, seed, files)")
    return manifest


def benchmark_files(study_dir: str | Path, env: str, seed: int) -> list[Path]:
    """The Snakemake benchmark files of the (env, seed)'s jobs, ``benchmarks/{stage}/{env}/
    seed{S}[/...].tsv`` (training, evaluation, Far data, splits), and of the environment's
    once-per-environment jobs, ``benchmarks/{stage}/{env}.tsv`` (its offline datasets)."""
    root = Path(study_dir) / "benchmarks"
    found = []
    for stage_dir in sorted(p for p in root.glob("*") if p.is_dir()):
        base = stage_dir / env
        found += sorted(stage_dir.glob(f"{env}.tsv"))
        found += sorted(base.glob(f"seed{seed}.tsv"))
        found += sorted((base / f"seed{seed}").rglob("*.tsv"))
    return found


#: Suffix of a job's process record stored beside its benchmark file (``X.tsv`` -> ``X.process.json``).
PROCESS_SUFFIX = ".process.json"


def process_record_path(benchmark: str | Path) -> Path:
    """Where the exact process record of the job of ``benchmark`` (``....tsv``) is stored."""
    benchmark = Path(benchmark)
    return benchmark.with_name(benchmark.name.removesuffix(".tsv") + PROCESS_SUFFIX)


def _copy_checked(src: Path, dst: Path, digest: str | None) -> bool:
    """Copy ``src`` to ``dst``; ``False`` when ``dst`` already holds the same bytes."""
    if digest is not None and file_sha256(src) != digest:
        raise PieceError(f"{src} changed since its manifest was written")
    if dst.exists():
        if file_sha256(dst) == file_sha256(src):
            return False
        raise PieceError(f"{dst} exists with different content; refusing to overwrite it")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)
    return True


def _is_environment_job(benchmark: Path) -> bool:
    """Whether ``benchmarks/{stage}/{env}.tsv`` belongs to a once-per-environment job (its data),
    not to one (env, seed)."""
    return len(benchmark.relative_to("benchmarks").parts) == 2


def method_of(path: str) -> str | None:
    """The method a stored file belongs to: ``results/{metrics,validation,test}/{env}/seed{S}/
    {method}[/...]`` and ``benchmarks/{evaluate,evaluate_test}/{env}/seed{S}/{method}...`` (the
    test phase ran one job per method before it ran one per (env, seed)); ``None`` for a file of
    no single method (data, splits, training runs, the test phase's ``evaluate_test/{env}/
    seed{S}.tsv``)."""
    parts = Path(path).parts
    layout = table_layout(path)
    if layout in PER_RUN_TABLES:
        return parts[4]
    if layout is not None:  # one table per method
        return Path(parts[4]).stem
    if len(parts) >= 5 and parts[0] == "benchmarks" and parts[1] == "evaluate":
        return parts[4]
    if len(parts) >= 5 and parts[0] == "benchmarks" and parts[1] == "evaluate_test":
        return Path(parts[4]).name.split(".")[0]
    return None


def _piece_jobs(files) -> tuple[set[str], set[str]]:
    """The methods and training runs whose tables a piece lists."""
    methods = {m for m in map(method_of, files) if m is not None}
    runs = {
        Path(f).stem
        for f in files
        if table_layout(f) in PER_RUN_TABLES
    }
    return methods, runs


def _job_of_piece(benchmark: Path, methods: set[str], runs: set[str]) -> bool:
    """Whether a benchmark file belongs to a job of the piece: an evaluation of one of its
    methods, a training of one of its runs, or a job of no single method (data, splits,
    mechanism). A piece that lists no metric table (a mechanism piece) stores no training
    benchmark: its study holds the restored pieces' ones beside those of the runs it made again,
    under the same paths."""
    parts = benchmark.parts
    if len(parts) >= 5 and parts[1] == "train":
        return Path(parts[-1]).stem in runs
    method = method_of(benchmark.as_posix())
    return method is None or method in methods


def store_piece(manifest_path: str | Path, study_dir: str | Path, store: str | Path) -> list[Path]:
    """Copy a piece (its manifest's files, its benchmark files, the manifest) into ``store``.

    Benchmark files of evaluations of methods, and of training runs, that the manifest lists no
    table of are not stored (the study directory may hold another study's jobs, e.g. the
    reference a variant reuses, :mod:`pnc.report.variant`). The benchmark of an environment's
    once-per-environment data job is stored with its first piece; when a later piece's study ran that job again (on another machine or checkout) and
    measured it differently, the stored benchmark is kept and a warning says so.

    Returns:
        The files written (already identical files are skipped).

    Raises:
        PieceError: a listed file is missing or changed, or a stored file of the (env, seed)
            differs.
    """
    study, store = Path(study_dir), Path(store)
    manifest = read_manifest(manifest_path)
    env, seed = str(manifest["env"]), int(manifest["seed"])
    written = []
    for rel, info in manifest["files"].items():
        src = study / rel
        if not src.is_file():
            raise PieceError(f"piece ({env}, seed {seed}): {src} is missing")
        if _copy_checked(src, store / rel, info["sha256"]):
            written.append(store / rel)
    methods, runs = _piece_jobs(manifest["files"])
    for src in benchmark_files(study, env, seed):
        rel = src.relative_to(study)
        if not _job_of_piece(rel, methods, runs):
            continue  # a job of another study in the same directory (a variant's reference)
        if (
            _is_environment_job(rel)
            and (store / rel).exists()
            and file_sha256(store / rel) != file_sha256(src)
        ):
            # the environment's data job ran again (a new machine or checkout): its first
            # measurement, stored with the environment's first piece, stays the one counted
            log.warning(
                "%s: kept the stored benchmark of %s's data job; this study measured it again "
                "(not stored)",
                store / rel,
                env,
            )
            continue
        if _copy_checked(src, store / rel, None):
            written.append(store / rel)
        # the job's exact CPU time and peak memory, from the record at the end of its log
        parts = rel.relative_to("benchmarks").parts
        record = read_process_record(
            study / "logs" / Path(*parts[:-1], f"{Path(parts[-1]).stem}.log")
        )
        if record is not None:
            target = store / process_record_path(rel)
            text = json.dumps(record, indent=2, sort_keys=True) + "\n"
            if target.exists() and target.read_text() != text:
                raise PieceError(
                    f"{target} exists with different content; refusing to overwrite it"
                )
            if not target.exists():
                write_json(target, record)
                written.append(target)
    target = store / MANIFESTS / env / f"seed{seed}.json"
    if _copy_checked(Path(manifest_path), target, None):
        written.append(target)
    return written


def stored_pieces(store: str | Path) -> list[tuple[str, int]]:
    """The (env, seed) pieces held by ``store``, sorted."""
    root = Path(store) / MANIFESTS
    pieces = []
    for path in sorted(root.glob("*/seed*.json")):
        manifest = read_manifest(path)
        pieces.append((str(manifest["env"]), int(manifest["seed"])))
    return sorted(pieces)


def seeds_of_every_env(store: str | Path, envs: Sequence[str]) -> list[int]:
    """The seeds ``store`` holds a piece of for every environment of ``envs`` (e.g. the
    mechanism seeds a table over seeds can use, ``scripts/reference_tables.sh
    --mechanism-store``).

    Raises:
        PieceError: no seed is stored for every environment (naming those without any).
    """
    stored = stored_pieces(store)
    seeds = set.intersection(*[{s for e, s in stored if e == env} for env in envs])
    if not seeds:
        bare = [env for env in envs if not any(e == env for e, _ in stored)]
        raise PieceError(
            f"{store}: no seed is stored for every environment"
            + (f" (none of {', '.join(bare)})" if bare else "")
        )
    return sorted(seeds)


def restore_pieces(
    store: str | Path, study_dir: str | Path, skip: Sequence[str] = ()
) -> list[Path]:
    """Copy every stored piece's files back into ``study_dir``, checking each hash.

    ``skip`` names methods whose files (:func:`method_of`: metric tables, evaluation benchmarks)
    are left out: a variant that changes them (:mod:`pnc.report.variant`) restores its own.

    Returns:
        The files written (already identical files are skipped).

    A benchmark file (or process record) of the study that differs from the stored one (its job
    ran again in this study) is replaced by the stored one, with a warning; a metric table that
    differs is refused.

    Raises:
        PieceError: a stored file is missing or does not match its manifest, or a listed file of
            the study differs from the stored one.
    """
    store, study = Path(store), Path(study_dir)
    written = []
    manifests = sorted((store / MANIFESTS).glob("*/seed*.json"))
    if not manifests:
        raise PieceError(f"{store} holds no pieces ({MANIFESTS}/*/seed*.json)")
    for path in manifests:
        manifest = read_manifest(path)
        for rel, info in manifest["files"].items():
            if method_of(rel) in skip:
                continue
            src = store / rel
            if not src.is_file():
                raise PieceError(f"{path}: stored file {src} is missing")
            if _copy_checked(src, study / rel, info["sha256"]):
                written.append(study / rel)
    bench = store / "benchmarks"
    records = [*bench.rglob("*.tsv"), *bench.rglob(f"*{PROCESS_SUFFIX}")] if bench.is_dir() else []
    for src in sorted(records):
        rel = src.relative_to(store)
        if method_of(rel.as_posix()) in skip:
            continue
        dst = study / rel
        if dst.exists():
            if file_sha256(dst) == file_sha256(src):
                continue
            # a job of this study ran again (the mechanism stage remakes its seed's data and
            # base network): the stored measurement, the one the pieces' costs count, is restored
            log.warning("%s: replaced this study's measurement by the stored one", dst)
            dst.unlink()
        _copy_checked(src, dst, None)
        written.append(dst)
    return written
