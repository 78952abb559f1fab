"""The tiny CI configuration (``.test/config.yaml``) end to end in temporary copies of the workflow:
the clean run, the full evaluation on its data and trained runs, the two evaluations' numbers
compared, a run interrupted with Ctrl-C and one killed with SIGKILL resumed, damaged tables and runs
named, a finished piece stored and rebuilt, a variant that reruns only what it changes, and a new
baseline joining with four files. Apart from ``test_workflow.py`` (the rules, the DAGs and the
config checks) so that the two run on different workers. The whole module is in the ``slow`` tier."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_copy import copy_workflow, start_in_own_group
from workflow_copy import job_counts as _job_counts
from workflow_copy import run_snakemake as _snakemake

from pnc.studies.mujoco.results import RESULT_COLUMNS

pytestmark = pytest.mark.slow
#: Started before every other file (tests/conftest.py): the suite's longest chain of runs.
RUN_FIRST = True

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _copy_workflow(dest: Path) -> Path:
    """A copy of what the workflow needs (the package itself is installed)."""
    dirs = ("workflow", "config", ".test", "envs", "profiles")
    return copy_workflow(dest, dirs, ("Snakefile", "config.yaml"))


def _tiny(tmp_path_factory, evaluation: str) -> Path:
    """A clean run of every rule on .test/config.yaml in a temporary copy (a few minutes), with
    the config's ``evaluation`` set (every later Snakemake call in the copy reads it)."""
    workdir = _copy_workflow(tmp_path_factory.mktemp(f"tiny-{evaluation}"))
    config = workdir / ".test" / "config.yaml"
    config.write_text(config.read_text() + f"\nevaluation: {evaluation}\n")
    proc = _snakemake(workdir, "--cores", "2", "--configfile", ".test/config.yaml", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return workdir


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny run with the default evaluation, ``two_phase``."""
    return _tiny(tmp_path_factory, "two_phase")


#: What the full evaluation shares with the two-phase run: the data, the splits and the trained
#: runs (with their jobs' benchmark files, logs and Snakemake's records of them). Neither depends
#: on the evaluation; everything from the evaluation on is computed afresh.
UPSTREAM = ("resources", "results/runs", "benchmarks/train", "logs/train", "benchmarks/splits",
            "logs/splits", "benchmarks/far_data", "logs/far_data", "benchmarks/offline_data",
            "logs/offline_data", ".snakemake/metadata")  # fmt: skip


@pytest.fixture(scope="module")
def tiny_run_full(tiny_run, tmp_path_factory) -> Path:
    """The tiny run with ``evaluation: full``, on the two-phase run's data and trained runs
    (:data:`UPSTREAM`): the evaluation, selection, mechanism and report jobs run, nothing before
    them (checked)."""
    workdir = _copy_workflow(tmp_path_factory.mktemp("tiny-full"))
    for name in UPSTREAM:
        if (tiny_run / name).exists():
            shutil.copytree(tiny_run / name, workdir / name)
    config = workdir / ".test" / "config.yaml"
    config.write_text(config.read_text() + "\nevaluation: full\n")
    proc = _snakemake(workdir, "--cores", "2", "--configfile", ".test/config.yaml", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    jobs = _job_counts(proc.stdout + proc.stderr)
    assert not {"train", "splits", "far_data", "offline_data"} & set(jobs), jobs
    assert {"evaluate", "select", "pnc_members", "mechanism"} <= set(jobs), jobs
    return workdir


@pytest.mark.slow
@pytest.mark.parametrize("evaluation", ["two_phase", "full"])
def test_tiny_config_end_to_end(request, evaluation):
    """All rules on .test/config.yaml, then a dry re-run with nothing to do."""
    workdir = request.getfixturevalue("tiny_run" if evaluation == "two_phase" else "tiny_run_full")

    results = pd.read_csv(workdir / "results" / "results.csv")
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    assert tuple(results.columns) == RESULT_COLUMNS
    assert set(results["data_source"]) == {"offline"}
    per_split = {"rmse", "rmse_std", "nll", "nll_std", "spearman"}
    expected = {("id", m) for m in per_split}
    for split in ("near", "far"):  # InvertedPendulum has no Mid split
        expected |= {(split, m) for m in per_split | {"auroc", "auroc_epistemic"}}
    for method in config["methods"]:
        rows = results[results["method"] == method]
        assert set(zip(rows["split"], rows["metric"], strict=True)) == expected, method
        assert rows["config"].nunique() == 1
    assert results.loc[results["metric"] == "rmse", "value"].notna().all()

    all_configs = pd.read_csv(workdir / "results" / "all_configs.csv")
    sample = {"id_sample", "far_sample"} if evaluation == "two_phase" else set()
    assert {"val", "id", "near", "far"} | sample == set(all_configs["split"])
    assert all_configs.groupby("method")["config"].nunique().to_dict() == {
        "deep_ensemble": 1,
        "laplace": 1,
        "mc_dropout": 1,
        "pnc": 2,
        "pnc_nocorr": 1,
        "subspace": 1,
        "swag": 2,
    }
    selection = json.loads((workdir / "results" / "selection.json").read_text())
    for method, rec in selection["InvertedPendulum"].items():
        chosen = all_configs[(all_configs["method"] == method) & all_configs["selected"]]
        assert set(chosen["config"]) == {rec["config"]}
        assert rec["val_nll"] == min(rec["candidates"].values())
    assert (workdir / "results" / "tables" / "cross_env.tex").exists()
    assert (workdir / "figures" / "frontier" / "InvertedPendulum.png").exists()
    # every run was trained with early stopping on the val split and records how
    for run_json in (workdir / "results" / "runs" / "InvertedPendulum" / "seed0").glob(
        "*/run.json"
    ):
        meta = json.loads(run_json.read_text())["meta"]
        assert meta["train_config"]["patience"] == config["train"]["patience"], run_json
        assert meta["val_nll"], run_json
    # the mechanism stage: stored members, the per-point table, figures and the table
    members = json.loads(
        (workdir / "results/members/InvertedPendulum/seed0/members.json").read_text()
    )
    assert members["config_id"] == selection["InvertedPendulum"]["pnc"]["config"]
    assert len(members["calibration_rows"]) == config["methods"]["pnc"]["fixed"]["calibration_size"]
    mechanism = pd.read_parquet(workdir / "results/mechanism/InvertedPendulum/seed0.parquet")
    points = mechanism[(mechanism.member == -1) & (mechanism.method == "pnc")]
    settings = config["mechanism"]
    n_points, n_boot = settings["points_per_split"], settings["bootstrap_points"]
    assert points.groupby("split")["point"].nunique().to_dict() == {
        "id": n_points,
        "near": n_points,
        "far": n_points,
    }
    assert set(mechanism["method"]) == {"pnc", "pnc_nocorr", "swag", "laplace", "subspace"}
    for figure in ("magnitudes", "frontier_sigma", "distance", "sketch"):
        assert (workdir / "figures/mechanism/InvertedPendulum" / f"{figure}.png").stat().st_size
    # Theorem 3 at the first mechanism.bootstrap_points points of each split
    boot = points[points.quantity == "rank_mixture"]
    assert boot.groupby("split")["point"].nunique().to_dict() == {
        "id": n_boot,
        "near": n_boot,
        "far": n_boot,
    }
    assert np.isfinite(boot["value"]).all() and (boot["value"] >= 1 - 1e-9).all()
    table = pd.read_csv(workdir / "results/tables/mechanism.csv")
    assert table["evidence"].str.startswith("3C").sum() == 2
    thm3 = table[table["evidence"].str.startswith("Thm 3")]
    assert len(thm3) == 1 and thm3["n"].iloc[0] == 3 * n_boot and thm3["estimate"].iloc[0] > 0
    # Figure 1 B/C's ratios (P&C, its ablation and the sampling baselines) and Figure 3's slopes
    ratios = table[table["evidence"].str.startswith("1B/C")].set_index("method")["estimate"]
    assert {"pnc", "pnc_nocorr"} <= set(ratios.index) and np.isfinite(ratios).all()
    slopes = table[table["evidence"].str.startswith(("3B", "3C"))]
    assert len(slopes) == 3 and np.isfinite(slopes[["estimate", "se"]].to_numpy()).all()
    # the OOD score's AUROC, total and per part, on the ID and Far mechanism points
    score = table[table["evidence"].str.startswith("Score: Far AUROC")].set_index("evidence")
    assert len(score) == 3 and (score["n"] == 2 * n_points).all()
    assert score["estimate"].between(0, 1).all()
    distance = table[table["evidence"].str.startswith("Input: nearest train row")]
    assert len(distance) == 1 and distance["n"].iloc[0] == 2 * n_points
    assert distance["estimate"].iloc[0] > 0
    assert (workdir / "figures" / "frontier_all.png").stat().st_size
    phases = ("evaluate_test", "assemble") if evaluation == "two_phase" else ()
    for rule in ("train", "evaluate", "select", *phases, "pnc_members", "mechanism"):
        assert list((workdir / "benchmarks" / rule).rglob("*.tsv")), rule
        assert list((workdir / "logs" / rule).rglob("*.log")), rule
    # every job's log (same path as its benchmark file) ends with its exact process record
    from pnc.report.costs import read_benchmarks
    from pnc.runtime import allocator
    from pnc.runtime.io import read_process_record

    caller = os.environ.get("GLIBC_TUNABLES")

    for bench in sorted((workdir / "benchmarks").rglob("*.tsv")):
        rel = bench.relative_to(workdir / "benchmarks")
        record = read_process_record(workdir / "logs" / rel.parent / f"{rel.name[:-4]}.log")
        assert record is not None and record["status"] == 0 and record["cpu_s"] > 0, rel
        # config allocator, default heap; the mechanism stage gets hugetlb=0 alone (pnc.runtime.allocator)
        short_lived = rel.parts[0] == "mechanism"
        added = allocator.SHORT_LIVED_TUNABLES if short_lived else allocator.HEAP
        assert record["glibc_tunables"] == allocator.tunables(caller, added), rel
    jobs = read_benchmarks(workdir / "benchmarks", workdir / "logs")
    assert (jobs["cpu_source"] == "process").all()

    again = _snakemake(workdir, "-n", "--configfile", ".test/config.yaml")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


def _text_rows(path: Path, keep=lambda row: True) -> list[str]:
    """The lines of a CSV whose row (a dict of its cells, as text) ``keep`` accepts."""
    header, *lines = path.read_text().splitlines()
    rows = csv.DictReader(path.read_text().splitlines())
    return [line for line, row in zip(lines, rows, strict=True) if keep(row)]


@pytest.mark.slow
def test_two_phase_gives_the_full_evaluations_numbers(tiny_run, tiny_run_full):
    """The same study evaluated in two phases and in full: byte-identical validation metrics
    (every configuration, every seed, every job), results.csv, selection.json and the mechanism
    table; all_configs.csv of the two phases is the full one's rows of the configurations the test
    plan names, in the same order, plus every configuration's frontier-sample rows."""
    mechanism = "results/mechanism/InvertedPendulum/seed0.parquet"
    for name in ("results/results.csv", "results/selection.json", "results/tables/mechanism.csv",
                 mechanism):  # fmt: skip
        assert (tiny_run / name).read_bytes() == (tiny_run_full / name).read_bytes(), name
    is_val = lambda row: row["split"] == "val"  # noqa: E731
    full_tables = sorted((tiny_run_full / "results/metrics").rglob("*.csv"))
    assert len(full_tables) == 7
    for table in full_tables:
        phase1 = (
            tiny_run / "results/validation" / table.relative_to(tiny_run_full / "results/metrics")
        )
        assert _text_rows(phase1, is_val) == _text_rows(table, is_val), phase1
        assert phase1.with_suffix(".npz").is_file()
    for name in ("results/all_configs.csv", "results/envs/InvertedPendulum/all_configs.csv"):
        two = _text_rows(tiny_run / name, lambda row: not row["split"].endswith("_sample"))
        full = _text_rows(tiny_run_full / name)
        assert _text_rows(tiny_run / name, is_val) == _text_rows(tiny_run_full / name, is_val)
        assert set(two) <= set(full) and two == [line for line in full if line in set(two)], name
    plan = json.loads((tiny_run / "results/envs/InvertedPendulum/test_plan.json").read_text())
    selection = json.loads((tiny_run / "results/selection.json").read_text())["InvertedPendulum"]
    scored = pd.read_csv(tiny_run / "results/all_configs.csv")
    scored = scored[scored.split == "far"].groupby("method")["config"].unique()
    for method, rec in selection.items():
        assert "selected" in plan["InvertedPendulum"][method][rec["config"]], method
        assert set(scored[method]) == set(plan["InvertedPendulum"][method]), method
    # the tiny grid's two P&C sigmas are both Figure 3A points
    assert len(plan["InvertedPendulum"]["pnc"]) == 2
    # the test phase restored Subspace's chain instead of running it again
    log = (tiny_run / "logs/evaluate_test/InvertedPendulum/seed0.log").read_text()
    log = log[log.index("test phase of InvertedPendulum seed 0 subspace") :]
    log = log[: log.index(" wrote ")]
    assert " restored in " in log and " built in " not in log, log[-2000:]
    # ... and so did the mechanism stage (the parquet above: the same samples as the full run's)
    log = (tiny_run / "logs/mechanism/InvertedPendulum/seed0.log").read_text()
    assert "subspace temperature=" in log and "posterior restored from results/validation/" in log
    full_log = (tiny_run_full / "logs/mechanism/InvertedPendulum/seed0.log").read_text()
    assert "posterior restored" not in full_log


#: Outputs that must not depend on how the run got there (timings live elsewhere).
DETERMINISTIC_OUTPUTS = ("results/results.csv", "results/all_configs.csv", "results/selection.json")
# The interrupted and resumed run builds the results only: its tests check the results, the metric
# tables and the jobs up to the aggregation, so the report and the mechanism stage (the tiny run
# checks those) are left out of it.
RESUMED_TARGET = "results/results.csv"


def _start_tiny(workdir: Path, target: str, output: Path) -> subprocess.Popen:
    """Start the tiny run of ``target`` in a process group of its own, its output (stdout and
    stderr) going to ``output``."""
    env = {
        **os.environ,
        "PYTHONWARNINGS": "ignore",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    args = [*SNAKEMAKE, target, "--cores", "2", "--configfile", ".test/config.yaml"]
    return start_in_own_group(args, workdir, env, output)


def _wait_for_finished(proc: subprocess.Popen, output: Path, rule: str, timeout: float) -> None:
    """Return once Snakemake's ``output`` reports a finished job of ``rule``; fail if the run
    ends first or none finishes within ``timeout`` seconds."""
    finished = re.compile(rf"Finished jobid: \d+ \(Rule: {rule}\)")
    deadline = time.monotonic() + timeout
    while not finished.search(output.read_text()):
        assert proc.poll() is None, f"the run ended before a {rule} job was reported finished"
        assert time.monotonic() < deadline, f"no finished {rule} job after {timeout} s"
        time.sleep(0.2)


def _interrupt_after_first(
    workdir: Path, target: str, rule: str, output: Path, timeout: float = 600
) -> int:
    """Start the tiny run of ``target``, send Ctrl-C (SIGINT) once Snakemake reports a finished
    job of ``rule`` (again each second until Snakemake says it stops); its output (stdout and
    stderr) goes to ``output``. Returns the run's exit code."""
    proc = _start_tiny(workdir, target, output)
    try:
        _wait_for_finished(proc, output, rule, timeout)
        # Snakemake drops a KeyboardInterrupt that lands while it writes a log line (its log
        # handler catches it), and the run then goes on to the end: repeat Ctrl-C until Snakemake
        # reports that it is stopping, as a user at the terminal would.
        stopping = "Terminating processes on user request"
        os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 300
        while True:
            try:
                return proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                assert time.monotonic() < deadline, "the interrupted run did not stop in 300 s"
                if stopping not in output.read_text():
                    os.killpg(proc.pid, signal.SIGINT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _finished_jobs(output: str) -> dict[str, int]:
    """Rule -> number of jobs Snakemake reported finished in ``output``."""
    counts: dict[str, int] = {}
    for rule in re.findall(r"Finished jobid: \d+ \(Rule: (\w+)\)", output):
        counts[rule] = counts.get(rule, 0) + 1
    return counts


@pytest.fixture(scope="module")
def resume_record(tiny_run, tmp_path_factory) -> dict:
    """The tiny run's results (:data:`RESUMED_TARGET`) interrupted with Ctrl-C between the two
    phases of the evaluation (after the selection job finished), then resumed: the work
    directory, the jobs finished before the interruption and those the resumed run scheduled
    (rule -> count), and the modification times (ns), taken before resuming, of outputs whose jobs
    had certainly finished (the data, the training runs, the validation phase's tables and stored
    posteriors, the selection and the test plan). It runs with config `batch: env` (one training,
    validation-phase and test-phase job per environment), so its results matching the tiny run's
    byte for byte also show that batching the jobs changes no result."""
    workdir = _copy_workflow(tmp_path_factory.mktemp("resumed"))
    config = workdir / ".test" / "config.yaml"
    config.write_text(config.read_text() + "\nbatch: env\n")
    output = tmp_path_factory.mktemp("interrupted") / "snakemake.log"
    code = _interrupt_after_first(workdir, RESUMED_TARGET, "select", output)
    assert code != 0 and not (workdir / "results" / "results.csv").exists()
    done = _finished_jobs(output.read_text())
    finished = [
        *sorted((workdir / "resources/splits").rglob("*")),
        *sorted((workdir / "resources/data").rglob("*.json")),
        *sorted((workdir / "results/runs").rglob("run.*")),
        *sorted((workdir / "results/validation").rglob("*.*")),
        *sorted((workdir / "results/envs").rglob("*.json")),
    ]
    assert len(finished) >= 5 + 2 * 4 + 2 * 7 + 2, finished
    mtimes = {str(p.relative_to(workdir)): p.stat().st_mtime_ns for p in finished if p.is_file()}
    proc = _snakemake(
        workdir, RESUMED_TARGET, "--cores", "2", "--configfile", ".test/config.yaml", timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    jobs = _job_counts(proc.stdout + proc.stderr)
    return {"workdir": workdir, "mtimes": mtimes, "done": done, "jobs": jobs}


@pytest.fixture(scope="module")
def resumed_run(resume_record) -> Path:
    return resume_record["workdir"]


@pytest.mark.slow
def test_interrupted_run_resumes_to_identical_results(tiny_run, resumed_run):
    for name in DETERMINISTIC_OUTPUTS:
        assert (resumed_run / name).read_bytes() == (tiny_run / name).read_bytes(), name
    tables = [
        *sorted((tiny_run / "results" / "validation").rglob("*.*")),
        *sorted((tiny_run / "results" / "test").rglob("*.csv")),
    ]
    assert len(tables) == 3 * 7  # the tiny config's 7 methods, one run each
    for table in tables:
        other = resumed_run / table.relative_to(tiny_run)
        assert other.read_bytes() == table.read_bytes(), table


@pytest.mark.slow
def test_resumed_run_reuses_finished_jobs(tiny_run, resume_record):
    """Interrupted between the phases, the resumed run recomputes nothing finished: no data,
    training, validation-phase or selection job is scheduled again, the test phase only where its
    job (one per environment, config `batch: env`) had not finished, and every output of the
    first phase keeps its modification time."""
    workdir, done, jobs = resume_record["workdir"], resume_record["done"], resume_record["jobs"]
    n_envs = len(list((tiny_run / "results/envs").glob("*/selection.json")))
    assert n_envs == 1 and len(list((tiny_run / "results/runs").glob("*/seed0/*/run.json"))) > 1
    assert done.get("evaluate_env", 0) == n_envs and done.get("train_env", 0) == n_envs, done
    assert not {"train", "evaluate", "evaluate_test"} & set(done), done  # the batches ran
    assert done.get("select") == 1, done
    assert not {"offline_data", "far_data", "splits", "train_env", "evaluate_env", "select"} & set(
        jobs
    )
    assert jobs.get("evaluate_test_env", 0) == n_envs - done.get("evaluate_test_env", 0), (
        jobs,
        done,
    )
    assert jobs["assemble"] == 1 and jobs["aggregate"] == 1, jobs
    for name, mtime in resume_record["mtimes"].items():
        assert (workdir / name).stat().st_mtime_ns == mtime, f"{name} was rewritten on resume"


@pytest.mark.slow
def test_results_rebuild_from_stored_pieces_alone(tiny_run, tmp_path):
    """A finished (env, seed)'s piece, stored and restored into a fresh copy of the workflow
    where nothing upstream ever ran, rebuilds the same results with the selection rules alone
    (``--allowed-rules select assemble aggregate``): the final tables depend only on committed
    files (the two phases' metric tables and the stored posteriors)."""
    piece = "results/pieces/InvertedPendulum/seed0.json"
    proc = _snakemake(tiny_run, piece, "--cores", "1", "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    store = tmp_path / "store"
    report = [sys.executable, "-m", "pnc.report"]
    subprocess.run(
        [*report, "store-piece", piece, "--study", ".", "--store", store], cwd=tiny_run, check=True
    )
    fresh = _copy_workflow(tmp_path / "fresh")
    subprocess.run([*report, "restore-pieces", store, "--study", fresh], check=True)
    assert not (fresh / "results/runs").exists() and not (fresh / "resources").exists()
    proc = _snakemake(
        fresh, "results/results.csv", "--allowed-rules", "select", "assemble", "aggregate",
        "--cores", "1", "--configfile", ".test/config.yaml",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = set(_job_counts(proc.stdout + proc.stderr)) - {"total"}
    assert jobs == {"select", "assemble", "aggregate"}
    for name in DETERMINISTIC_OUTPUTS:
        assert (fresh / name).read_bytes() == (tiny_run / name).read_bytes(), name
    # the mechanism stage on the restored study, by the script that builds the reference folders:
    # the seed's data, splits and the runs the stage reads are made again, the restored metric
    # tables are not recomputed, and the mechanism table equals the full run's
    tables = sorted(p for d in ("validation", "test") for p in (fresh / "results" / d).rglob("*.*"))
    assert len(tables) == 3 * 7  # the tiny config's 7 methods, one run each
    stamps = {t: t.stat().st_mtime_ns for t in tables}
    script = [
        "bash", str(ROOT / "scripts/reference_tables.sh"), "--config", ".test/config.yaml",
        "--store", str(store), "--study", str(fresh), "--out", str(tmp_path / "folder"),
        "--mechanism",
    ]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(script, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # both of the script's Snakemake calls (tables and figures, then the mechanism) ran jobs,
    # none of them an evaluation
    job_tables = re.findall(r"Job stats:\n(.*?)\ntotal", proc.stdout + proc.stderr, re.S)
    assert len(job_tables) == 2 and not any("evaluate" in t for t in job_tables), job_tables
    assert {t: t.stat().st_mtime_ns for t in tables} == stamps
    name = "results/tables/mechanism.csv"
    assert (fresh / name).read_bytes() == (tiny_run / name).read_bytes()


@pytest.mark.slow
def test_a_variant_runs_only_what_it_changes_and_reuses_the_rest(tiny_run, tmp_path):
    """The tiny study with P&C's own 100-step base run and calibration rows from the whole ID
    pool, run as a variant of the tiny run's stored piece: the variant's piece holds P&C's and its
    ablation's jobs only, and its folder (the variant's pieces plus the reference's other methods)
    has the reference's rows, bit for bit, for every other method."""
    piece = "results/pieces/InvertedPendulum/seed0.json"
    proc = _snakemake(tiny_run, piece, "--cores", "1", "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    reference = tmp_path / "reference"
    report = [sys.executable, "-m", "pnc.report"]
    subprocess.run(
        [*report, "store-piece", piece, "--study", ".", "--store", reference],
        cwd=tiny_run, check=True,
    )  # fmt: skip
    repo = _copy_workflow(tmp_path / "repo")
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    config = yaml.safe_load((repo / ".test/config.yaml").read_text())
    config["methods"]["pnc"].update(base_steps=100, calibration_pool="id_pool")
    config["methods"]["pnc_nocorr"]["base_steps"] = 100
    (repo / ".test/authors.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    common = ["--config", ".test/authors.yaml", "--reuse", str(reference), "--reference",
              ".test/config.yaml", "--store", str(tmp_path / "variant")]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable}
    runs = subprocess.run(
        ["bash", "scripts/reference_runs.sh", *common, "--cores", "1"],
        cwd=repo, capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert runs.returncode == 0, runs.stdout[-3000:] + runs.stderr[-3000:]
    manifest = json.loads((tmp_path / "variant/manifests/InvertedPendulum/seed0.json").read_text())
    assert {Path(f).parts[4].removesuffix(".csv") for f in manifest["files"]} == {
        "pnc", "pnc_nocorr"
    }  # fmt: skip
    assert all("base-steps100" in f for f in manifest["files"] if "/validation/" in f)
    run = json.loads(
        (repo / "results/runs/InvertedPendulum/seed0/base-steps100/run.json").read_text()
    )
    assert run["meta"]["train_config"]["steps"] == 100
    assert not (repo / "results/runs/InvertedPendulum/seed0/base").exists()
    folder = tmp_path / "folder"
    tables = subprocess.run(
        ["bash", "scripts/reference_tables.sh", *common, "--study", str(tmp_path / "study"),
         "--out", str(folder)],
        cwd=repo, capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert tables.returncode == 0, tables.stdout[-3000:] + tables.stderr[-3000:]
    changed = lambda row: row["method"] in ("pnc", "pnc_nocorr")  # noqa: E731
    kept = lambda row: not changed(row)  # noqa: E731
    assert _text_rows(folder / "results.csv", kept) == _text_rows(
        tiny_run / "results/results.csv", kept
    )
    assert _text_rows(folder / "results.csv", changed) != _text_rows(
        tiny_run / "results/results.csv", changed
    )
    ours = json.loads((tiny_run / "results/selection.json").read_text())["InvertedPendulum"]
    theirs = json.loads((folder / "selection.json").read_text())["InvertedPendulum"]
    assert {m: r for m, r in theirs.items() if m not in ("pnc", "pnc_nocorr")} == {
        m: r for m, r in ours.items() if m not in ("pnc", "pnc_nocorr")
    }


def _refused_by_selection(
    study: Path, name: str, problem: str, cores: str = "2"
) -> subprocess.CompletedProcess:
    """Run the tiny study's results in ``study``: it must fail at InvertedPendulum's selection,
    whose log names the table ``name``, the ``problem`` and the command that rebuilds the table.
    Returns the run."""
    proc = _snakemake(
        study, "results/results.csv", "--cores", cores, "--configfile", ".test/config.yaml"
    )
    assert proc.returncode != 0
    log = (study / "logs/select/InvertedPendulum.log").read_text()
    assert name in log and problem in log, log[-3000:]
    assert f"snakemake --forcerun {name}" in log, log[-3000:]
    return proc


@pytest.mark.slow
def test_non_finite_validation_table_fails_selection_naming_it(resumed_run):
    """A validation-phase table holding a non-finite value stops the selection, before the test
    phase, naming the file and the command that rebuilds it."""
    name = "results/validation/InvertedPendulum/seed0/swag/base.csv"
    table = resumed_run / name
    text, stat = table.read_text(), table.stat()
    lines = text.splitlines(keepends=True)
    head, _, source = lines[3].rsplit(",", 2)  # the value is the last cell but one
    table.write_text("".join([*lines[:3], f"{head},nan,{source}", *lines[4:]]))
    try:
        proc = _refused_by_selection(resumed_run, name, "non-finite value", cores="1")
        assert "Rule: evaluate_test" not in proc.stdout + proc.stderr
    finally:
        table.write_text(text)
        os.utime(table, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.fixture(scope="module")
def full_copy(tiny_run_full, tmp_path_factory) -> Path:
    """A copy of the finished tiny run with ``evaluation: full``, for the fault tests to damage."""
    dest = tmp_path_factory.mktemp("full-copy") / "study"
    shutil.copytree(tiny_run_full, dest, symlinks=True)
    return dest


#: Per evaluation: the finished study the fault tests damage, the run it must equal once repaired,
#: the directory of its metric tables and the log of the job that writes SWAG's (the resumed run's
#: jobs are batched per environment, config `batch: env`).
FAULT_STUDIES = {
    "two_phase": (
        "resumed_run", "tiny_run", "results/validation", "logs/evaluate_env/InvertedPendulum.log"
    ),
    "full": (
        "full_copy", "tiny_run_full", "results/metrics",
        "logs/evaluate/InvertedPendulum/seed0/swag/base.log",
    ),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("evaluation", list(FAULT_STUDIES))
def test_cut_metric_table_fails_selection_naming_it(request, evaluation):
    """A table cut at a line boundary is refused by the selection job, which names the file, the
    missing rows and the command that rebuilds it; that command restores the results."""
    study_name, reference_name, tables, _ = FAULT_STUDIES[evaluation]
    study, reference = request.getfixturevalue(study_name), request.getfixturevalue(reference_name)
    name = f"{tables}/InvertedPendulum/seed0/pnc/base.csv"
    table = study / name
    table.write_text("".join(table.read_text().splitlines(keepends=True)[:14]))
    _refused_by_selection(study, name, "incomplete metric tables")
    proc = _snakemake(
        study, "results/results.csv", "--cores", "2", "--forcerun", name,
        "--configfile", ".test/config.yaml", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for output in DETERMINISTIC_OUTPUTS:
        assert (study / output).read_bytes() == (reference / output).read_bytes(), output


@pytest.mark.slow
@pytest.mark.parametrize("evaluation", list(FAULT_STUDIES))
def test_truncated_run_fails_naming_it_and_the_target(request, evaluation):
    study_name, _, tables, job_log = FAULT_STUDIES[evaluation]
    study = request.getfixturevalue(study_name)
    run = study / "results/runs/InvertedPendulum/seed0/base/run.msgpack"
    run.write_bytes(run.read_bytes()[:-100])
    target = f"{tables}/InvertedPendulum/seed0/swag/base.csv"
    proc = _snakemake(
        study, target, "--cores", "1", "--forcerun", target,
        "--configfile", ".test/config.yaml",
    )  # fmt: skip
    assert proc.returncode != 0
    log = (study / job_log).read_text()
    assert "run.msgpack" in log and "--forcerun" in log, log[-3000:]


def _kill_once_written(
    workdir: Path, target: str, written: str, output: Path, timeout: float = 600
) -> None:
    """Start the tiny run of ``target`` in a process group of its own and, once a file matching
    the glob ``written`` (relative to ``workdir``) exists, kill the whole group (Snakemake and its
    running jobs) with SIGKILL, as a crash or a power loss would stop it: nothing gets to clean
    up. Its output goes to ``output``."""
    proc = _start_tiny(workdir, target, output)
    deadline = time.monotonic() + timeout
    try:
        while not any(workdir.glob(written)):
            assert proc.poll() is None, f"the run ended before {written} was written"
            assert time.monotonic() < deadline, f"no {written} after {timeout} s"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


#: The environment's tables that the test phase's assembly writes.
ASSEMBLED = (
    "results/envs/InvertedPendulum/all_configs.csv",
    "results/envs/InvertedPendulum/results.csv",
)


@pytest.mark.slow
def test_killed_run_resumes_after_unlock(tiny_run, tmp_path):
    """A run killed with SIGKILL part-way (the process group: Snakemake and its jobs) leaves
    Snakemake's lock: the plain rerun stops naming it, ``--unlock`` removes it, and the rerun then
    finishes with the uninterrupted run's results (docs/workflow.md, "After a crash, a kill or a
    power loss"). The run to kill is the finished tiny run with its test phase and results taken
    away, killed once the test-phase job (one per (env, seed), every method in turn) has written
    its first method's table: the rerun runs the killed job again, the tables it wrote included."""
    assert (tiny_run / ASSEMBLED[0]).is_file()
    workdir = tmp_path / "killed"
    shutil.copytree(
        tiny_run, workdir, symlinks=True
    )  # modification times kept: nothing else reruns
    shutil.rmtree(workdir / "results/test")  # the test phase, and all it feeds
    for name in (*DETERMINISTIC_OUTPUTS, *ASSEMBLED):
        (workdir / name).unlink()
    test_dir = "results/test/InvertedPendulum/seed0"
    _kill_once_written(workdir, RESUMED_TARGET, f"{test_dir}/*.csv", tmp_path / "killed.log")
    assert not (workdir / "results" / "results.csv").exists()
    written = sorted(p.name for p in (workdir / test_dir).glob("*.csv"))
    assert 1 <= len(written) < 7, written  # killed part-way through the methods
    assert any((workdir / ".snakemake" / "locks").iterdir()), "the killed run left its lock"
    args = (RESUMED_TARGET, "--cores", "2", "--configfile", ".test/config.yaml")
    proc = _snakemake(workdir, *args)
    assert proc.returncode != 0
    assert "Directory cannot be locked" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert "--unlock" in proc.stdout + proc.stderr
    proc = _snakemake(workdir, "--unlock", "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    proc = _snakemake(workdir, *args, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    jobs = _job_counts(proc.stdout + proc.stderr)
    assert not {"train", "evaluate", "select"} & set(jobs), jobs
    assert jobs.get("evaluate_test", 0) == 1, jobs  # the killed job, its written tables too
    for name in DETERMINISTIC_OUTPUTS:
        assert (workdir / name).read_bytes() == (tiny_run / name).read_bytes(), name


#: The toy baseline's module (tests/toy_baseline.py, which the unit tests import), as a new
#: module of the package.
TOY_BASELINE = (Path(__file__).parent / "toy_baseline.py").read_text()


@pytest.mark.slow
def test_a_new_baseline_joins_the_tiny_run_with_four_files(tiny_run, tmp_path, monkeypatch):
    """A new MuJoCo baseline touches four files: its module and one registry line (in a copy of
    the package, first on the jobs' ``PYTHONPATH``), its id in the schema's method enum and its
    entry in one config (the tiny run's overlay: its grid, and its id in ``run_methods``).
    Snakemake then trains nothing (the baseline reads the shared base run), evaluates and selects
    the baseline, and the other methods' rows stay as they were."""
    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "pnc", lib / "pnc", ignore=shutil.ignore_patterns("__pycache__"))
    (lib / "pnc/methods/regression/jitter.py").write_text(TOY_BASELINE)  # 1. its module
    init = lib / "pnc/methods/regression/__init__.py"  # 2. one registry line (and its import)
    text = init.read_text()
    last = "        DeepEnsembleMixture(),\n"
    assert text.count(last) == 1
    registry_import = "from pnc.methods.registry import Registry"
    assert text.count(registry_import) == 1
    text = text.replace(last, last + "        Jitter(),\n").replace(
        registry_import, "from pnc.methods.regression.jitter import Jitter\n" + registry_import
    )
    init.write_text(text)
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)
    schema = work / "workflow/schemas/config.schema.yaml"  # 3. its id in the schema's enum
    enum = "deep_ensemble_mixture]"
    assert schema.read_text().count(enum) == 1
    schema.write_text(schema.read_text().replace(enum, "deep_ensemble_mixture, jitter]"))
    tiny = work / ".test/config.yaml"  # 4. its entry in one config
    config = yaml.safe_load(tiny.read_text())
    config["methods"]["jitter"] = {"fixed": {"n_samples": 4}, "grid": {"noise": [0.1, 1.0]}}
    config["run_methods"].append("jitter")
    tiny.write_text(yaml.safe_dump(config, sort_keys=False))

    monkeypatch.setenv("PYTHONPATH", str(lib))
    proc = _snakemake(work, "--cores", "2", "--configfile", ".test/config.yaml", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    counts = _job_counts(proc.stdout + proc.stderr)
    assert "train" not in counts and counts.get("evaluate", 0) >= 1, counts
    results = pd.read_csv(work / "results/results.csv")
    assert set(results.loc[results["method"] == "jitter", "config"]) <= {"noise=0.1", "noise=1"}
    assert (results["method"] == "jitter").any()
    others = lambda row: row["method"] != "jitter"  # noqa: E731
    assert _text_rows(work / "results/results.csv", others) == _text_rows(
        tiny_run / "results/results.csv", others
    )
    selection = json.loads((work / "results/selection.json").read_text())["InvertedPendulum"]
    assert "jitter" in selection
