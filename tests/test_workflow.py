"""The Snakemake workflow: lint, the paper protocol's DAG, the SLURM profile, config validation,
atomic outputs, and (marked ``slow``) the tiny CI configuration end to end in a temporary copy."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pnc.io import atomic_path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def _copy_workflow(dest: Path) -> Path:
    """A copy of what the workflow needs (the package itself is installed)."""
    for name in ("workflow", "config", ".test", "envs", "profiles"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "Snakefile", dest / "Snakefile")
    shutil.copy(ROOT / "config.yaml", dest / "config.yaml")
    return dest


def _snakemake(cwd: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SNAKEMAKE, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        # the jobs' `python` must be the interpreter running the tests (with pnc installed)
        env={
            **os.environ,
            "PYTHONWARNINGS": "ignore",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )


def _job_counts(output: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a (dry) run."""
    match = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+(\d+)", output, re.S)
    assert match, output[-3000:]
    counts = {}
    for line in match.group(1).splitlines():
        name, count = line.split()
        counts[name] = int(count)
    counts["total"] = int(match.group(2))
    return counts


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return _copy_workflow(tmp_path_factory.mktemp("workflow"))


def test_lint_is_clean(workdir):
    proc = _snakemake(workdir, "--lint", "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_paper_protocol_dag(workdir):
    """config.yaml: 11 envs x 10 seeds; 7 training runs and 11 (method, run) jobs per (env, seed)."""
    proc = _snakemake(workdir, "-n", "--configfile", "config.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = _job_counts(proc.stdout)
    n_env, n_seed = 11, 10
    # runs: base, deep_ensemble-n_members5, mc_dropout x 5 rates
    # evaluation jobs: pnc, pnc_nocorr, swag, laplace, subspace (base), deep_ensemble, 5 x mc_dropout
    expected = {
        "minari_data": n_env,
        "far_data": n_env,
        "splits": n_env * n_seed,
        "train": n_env * n_seed * 7,
        "evaluate": n_env * n_seed * 11,
        "select": n_env,
        "aggregate": 1,
        "report_tables": 1,
        "report_frontier_overview": 1,
        "report_frontier": n_env,
        "report_metrics": n_env,
        "all": 1,
    }
    assert {k: v for k, v in counts.items() if k != "total"} == expected
    # every P&C grid point is evaluated: 3 sigma x 4 bootstrap fractions x 2 ridges
    pnc_job = re.search(r"--method pnc --run-id base .*?--grid '([^']*)'", proc.stdout)
    grid = json.loads(pnc_job.group(1))["grid"]
    assert [len(v) for v in grid.values()] == [3, 4, 2]


def test_one_environment_target(workdir):
    target = "results/envs/Hopper/results.csv"  # before --configfile, which takes several values
    proc = _snakemake(workdir, "-n", target, "--configfile", "config.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = _job_counts(proc.stdout)
    assert counts["train"] == 10 * 7 and counts["evaluate"] == 10 * 11 and counts["select"] == 1
    assert "aggregate" not in counts and "Ant" not in proc.stdout


def test_slurm_profile_resolves(workdir):
    profile = workdir / "profiles" / "slurm"
    proc = _snakemake(workdir, "-n", "--profile", str(profile), "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "profiles/slurm" in proc.stdout + proc.stderr
    assert _job_counts(proc.stdout)["train"] == 3
    settings = yaml.safe_load((profile / "config.yaml").read_text())
    assert settings["executor"] == "slurm"
    rules = _snakemake(workdir, "--list-rules", "--configfile", ".test/config.yaml")
    names = set(rules.stdout.split())
    assert set(settings["set-resources"]) <= names, set(settings["set-resources"]) - names


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda c: c.update(envs=["Cartpole"]), ["envs", "InvertedPendulum"]),
        (lambda c: c["data"].update(source="d4rl"), ["source", "minari", "offline"]),
        (lambda c: c["methods"].update(bayes_by_backprop={}), ["bayes_by_backprop", "laplace"]),
        (lambda c: c["methods"]["swag"]["grid"].update(scal=[1.0]), ["swag", "scal", "scale"]),
        (lambda c: c["train"].update(steps=0), ["steps"]),
        (lambda c: c.update(seed=[0]), ["seed"]),
    ],
    ids=["env", "source", "method", "hyperparameter", "steps", "unknown-top-level"],
)
def test_bad_config_is_rejected_naming_the_key(workdir, tmp_path, change, named):
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    change(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode != 0
    message = proc.stdout + proc.stderr
    for word in named:
        assert word in message, message[-3000:]
    assert "Job stats" not in message  # rejected before any job is planned


def test_behaviour_policies_are_trained_only_where_none_are_stored(workdir, tmp_path):
    """Offline source: stored ARS policies are rolled out as they are; other envs train their own."""
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    config["envs"] = ["InvertedPendulum", "Ant"]  # policies stored for the first only
    path = tmp_path / "offline.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _job_counts(proc.stdout).get("behaviour_policies") == 1
    assert "pnc.data.ars Ant --out resources/policies" in proc.stdout
    config["data"]["retrain_policies"] = True
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _job_counts(proc.stdout).get("behaviour_policies") == 2


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out" / "table.csv"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("job failed")
    assert not target.exists() and list(target.parent.iterdir()) == []
    with atomic_path(target) as tmp:
        tmp.write_text("complete")
    assert target.read_text() == "complete" and len(list(target.parent.iterdir())) == 1


@pytest.mark.slow
def test_tiny_config_end_to_end(tmp_path):
    """All rules on .test/config.yaml, then a dry re-run with nothing to do (a few minutes)."""
    workdir = _copy_workflow(tmp_path)
    proc = _snakemake(workdir, "--cores", "2", "--configfile", ".test/config.yaml", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    results = pd.read_csv(workdir / "results" / "results.csv")
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    assert list(results.columns) == [
        "env",
        "method",
        "config",
        "seed",
        "split",
        "metric",
        "value",
        "data_source",
    ]
    assert set(results["data_source"]) == {"offline"}
    per_split = {"rmse", "rmse_std", "nll", "spearman"}
    expected = {("id", m) for m in per_split}
    for split in ("near", "far"):  # InvertedPendulum has no Mid split
        expected |= {(split, m) for m in per_split | {"auroc", "auroc_epistemic"}}
    for method in config["methods"]:
        rows = results[results["method"] == method]
        assert set(zip(rows["split"], rows["metric"], strict=True)) == expected, method
        assert rows["config"].nunique() == 1
    assert results.loc[results["metric"] == "rmse", "value"].notna().all()

    all_configs = pd.read_csv(workdir / "results" / "all_configs.csv")
    assert {"val", "id", "near", "far"} == set(all_configs["split"])
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
    for rule in ("train", "evaluate", "select"):
        assert list((workdir / "benchmarks" / rule).rglob("*.tsv")), rule
        assert list((workdir / "logs" / rule).rglob("*.log")), rule

    again = _snakemake(workdir, "-n", "--configfile", ".test/config.yaml")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
