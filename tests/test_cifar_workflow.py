"""The CIFAR-10 workflow (cifar.smk): its rules follow the stage convention, bad configs and
missing data fail naming the key or file, and the tiny configuration runs end to end on CPU in a
temporary copy and produces Table 2's columns for every method. The whole module is in the ``slow``
tier: its tests run Snakemake in subprocesses, several seconds each."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from snakemake.exceptions import WorkflowError
from workflow_copy import config_error, copy_workflow, run_snakemake

pytestmark = pytest.mark.slow
#: Started before every other file (tests/conftest.py): the suite's longest chain of runs.
RUN_FIRST = True

ROOT = Path(__file__).resolve().parents[1]
RULES = sorted((ROOT / "workflow" / "rules" / "cifar").glob("*.smk"))
TINY = "config/cifar_tiny.yaml"


def _effective(workdir: Path, overlay: str) -> dict:
    """The config the workflow reads: config/cifar.yaml with ``overlay`` deep-merged over it."""
    from snakemake.utils import update_config

    config = yaml.safe_load((workdir / "config/cifar.yaml").read_text())
    update_config(config, yaml.safe_load((workdir / overlay).read_text()))
    return config


def _copy(dest: Path) -> Path:
    return copy_workflow(dest, ("workflow", "config", "envs", "profiles"), ("cifar.smk",))


def _snakemake(cwd: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return run_snakemake(cwd, "-s", "cifar.smk", *args, timeout=timeout)


def test_every_cifar_rule_runs_a_thread_limited_stage_with_log_and_benchmark():
    names = []
    for path in RULES:
        for block in re.split(r"^(?=rule )", path.read_text(), flags=re.M)[1:]:
            name = re.match(r"rule (\w+):", block).group(1)
            names.append(name)
            for directive in ("log:", "benchmark:", "threads:", "message:", "resources:"):
                assert f"\n    {directive}" in block, (name, directive)
            assert re.search(r'"python -m pnc\.workflow cifar_\w+ --threads \{threads\} ', block), name  # fmt: skip
            assert "{log:q}" in block, name
    assert {"cifar_data", "cifar_train", "cifar_validate", "cifar_select", "cifar_posthoc", "cifar_tables"} <= set(names)  # fmt: skip
    train = next(b for p in RULES for b in re.split(r"^(?=rule )", p.read_text(), flags=re.M) if b.startswith("rule cifar_train:"))  # fmt: skip
    assert 'gpu=RES["train"]["gpu"]' in train


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return _copy(tmp_path_factory.mktemp("cifar"))


def test_paper_protocol_dag(workdir):
    """5 seeds; runs: base, 4 ensemble members, 4 dropout rates; 10 methods scored per seed, the
    6 that select among configurations also validated per seed and selected once from every
    seed's sweep."""
    proc = _snakemake(workdir, "-n", "--configfile", "config/cifar.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(cifar\w*)\s+(\d+)$", proc.stdout, flags=re.M))
    assert counts == {
        "cifar_fetch": "1", "cifar_data": "1", "cifar_train": str(5 * 9), "cifar_validate": str(5 * 6),
        "cifar_select": "6", "cifar_posthoc": str(5 * 10), "cifar_tables": "1", "cifar": "1",
    }  # fmt: skip
    assert "MuJoCo" not in proc.stdout and "minari" not in proc.stdout
    # the DAG wrote each method's configurations, keyed by id, for its jobs
    assert "--sweep results/cifar/sweeps/pnc.json" in proc.stdout
    pnc = json.loads((workdir / "results/cifar/sweeps/pnc.json").read_text())
    assert len(pnc) == 6 * 3 * 3
    record = pnc["block=1+0,sigma=25,bootstrap_frac=0.1"]["config"]
    assert (record["block"], record["sigma"], record["bootstrap_frac"]) == ([1, 0], 25.0, 0.1)
    assert record["n_members"] == 50  # the settings, with the point: the whole configuration


def test_evaluate_names_the_methods_that_run(workdir, tmp_path):
    """An overlay runs fewer methods than the defaults configure by naming them (a deep merge
    cannot remove a configured method)."""
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump({"evaluate": ["pnc", "msp"]}))
    proc = _snakemake(workdir, "-n", "-p", "--configfile", TINY, str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(cifar\w*)\s+(\d+)$", proc.stdout, flags=re.M))
    assert (counts["cifar_validate"], counts["cifar_posthoc"], counts["cifar_train"]) == (
        "1",
        "2",
        "1",
    )
    assert "--methods pnc msp " in proc.stdout


def test_lint_is_clean(workdir):
    proc = _snakemake(workdir, "--lint", "--configfile", TINY)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def test_slurm_profile_resolves(workdir):
    """The SLURM profile with the paper config (the rules' gpu resource becomes --gpus there)."""
    proc = _snakemake(workdir, "-n", "--profile", "profiles/slurm", "--configfile", "config/cifar.yaml")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "profiles/slurm" in proc.stdout + proc.stderr


def _bad_config(workdir: Path, tmp_path: Path, change: dict) -> Path:
    """The tiny config with ``change`` merged in (``methods`` and mappings key by key), written to
    ``tmp_path/bad.yaml``."""
    config = yaml.safe_load((workdir / TINY).read_text())
    for key, value in change.items():
        if key == "methods":
            config["methods"] = {**config["methods"], **value}
        elif isinstance(value, dict):
            config[key] = {**config.get(key, {}), **value}
        else:
            config[key] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            {
                "methods": {
                    "pnc": {"grid": {"block": [[5, 0]], "sigma": [1.0], "bootstrap_frac": [0.5]}}
                }
            },
            "methods.pnc.grid.block [5, 0]",
        ),  # fmt: skip
        ({"data": {"ood": ["svhn", "imagenet"]}}, "data.ood[1]"),
        (
            {"data": {"ood": ["svhn", "cifar10"]}},
            "data.ood ['cifar10']: not an OpenOOD v1.5 OOD set of cifar10",
        ),  # fmt: skip
        ({"report": {"std": "ddof0"}}, "report.std"),
        (
            {"methods": {"swag": {"grid": {"start_epoch": [1]}}}},
            "methods.swag.grid.start_epoch [1]",
        ),  # fmt: skip
        ({"methods": {"nope": {}}}, "unknown key(s) nope"),
        ({"train": {"epochs": 2, "warmup_epochs": 3}}, "invalid config: train: warmup_epochs"),
        ({"evaluate": ["pnc", "nope"]}, "evaluate[1]"),
    ],
)
def test_bad_config_is_rejected_naming_the_key(workdir, tmp_path, change, named):
    path = _bad_config(workdir, tmp_path, change)
    # the workflow's DAG built in this process (a fraction of a second, no interpreter start-up)
    err = config_error(workdir, "cifar.smk", path)
    assert isinstance(err, WorkflowError), repr(err)
    assert named in str(err), str(err)[-3000:]


def test_a_rejected_config_prints_its_message_and_plans_no_job(workdir, tmp_path):
    """On the command line: a non-zero exit, the message naming the key, and no job planned."""
    path = _bad_config(workdir, tmp_path, {"evaluate": ["pnc", "nope"]})
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode != 0 and "Job stats" not in proc.stdout + proc.stderr
    assert "evaluate[1]" in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_missing_data_fails_the_data_job_naming_the_files(workdir, tmp_path):
    config = yaml.safe_load((workdir / TINY).read_text())
    config["data"] = {**config["data"], "root": str(tmp_path / "nodata"), "tiny": None, "fetch": False}  # fmt: skip
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(config))
    # the target before --configfile, which takes several values
    proc = _snakemake(workdir, "resources/cifar/data/data.json", "--cores", "1", "--configfile", str(path))  # fmt: skip
    assert proc.returncode != 0
    log = (workdir / "logs/cifar/data.log").read_text()
    assert "data_batch_1.bin" in log and "test_places365.txt" in log and "expected layout" in log


def test_offline_fetch_job_names_every_missing_file_and_how_to_place_it(workdir, tmp_path):
    """The fetch rule with every source unreachable (file:// URLs to nothing; no network)."""
    from pnc.studies.cifar.fetch import SOURCES

    config = yaml.safe_load((workdir / TINY).read_text())
    nowhere = {n: {"url": (tmp_path / "none" / n).as_uri()} for n in SOURCES}
    config["data"] = {
        **config["data"], "root": str(tmp_path / "nodata"), "tiny": None, "sources": nowhere,
        "ood": ["cifar100", "svhn"],
    }  # fmt: skip
    path = tmp_path / "offline.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "resources/cifar/data/data.json", "--cores", "1", "--configfile", str(path))  # fmt: skip
    assert proc.returncode != 0
    log = (workdir / "logs/cifar/fetch.log").read_text()
    for name in ("data_batch_1.bin", "test_batch.bin", "test_cifar100.txt", "test_svhn.txt",
                 "images_classic/svhn/", "place them by hand", "expected layout"):  # fmt: skip
        assert name in log, name


PROBE_RULE = """include: "cifar.smk"


rule probe_job_environment:
    output:
        "probe/environment.txt",
    log:
        "logs/probe.log",
    benchmark:
        "benchmarks/probe.tsv"
    shell:
        "python -c 'import os; print(os.environ.get(\\"XLA_PYTHON_CLIENT_PREALLOCATE\\"))'"
        " > {output:q} 2> {log:q}"
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "false"), ("true", "true")])
def test_jobs_allocate_gpu_memory_as_needed_unless_the_user_says(workdir, monkeypatch, given, seen):
    """A job process of the CIFAR workflow sees XLA_PYTHON_CLIENT_PREALLOCATE=false, so that
    several jobs can share one GPU under `--resources gpu=N` (JAX otherwise reserves 75 % of the
    GPU in the first job); a value the user set is kept."""
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    if given is not None:
        monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", given)
    probe = workdir / "probe.smk"
    probe.write_text(PROBE_RULE)
    out = workdir / "probe" / "environment.txt"
    out.unlink(missing_ok=True)
    try:
        proc = run_snakemake(workdir, "-s", "probe.smk", "--cores", "1", "probe/environment.txt", "--configfile", TINY)  # fmt: skip
    finally:
        probe.unlink()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text().strip() == seen


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    workdir = _copy(tmp_path_factory.mktemp("cifar_tiny"))
    proc = _snakemake(workdir, "--cores", "2", "--configfile", TINY, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return workdir


@pytest.mark.slow
def test_tiny_cifar_workflow_end_to_end(tiny_run):
    workdir = tiny_run
    config = _effective(workdir, TINY)
    table = pd.read_csv(workdir / "results/cifar/tables/table2.csv")
    assert set(table["method"]) == set(config["methods"])
    columns = ["acc", "near_auroc", "near_fpr95", "far_auroc", "far_fpr95"]
    for col in columns:
        assert table[f"{col}_mean"].between(0, 100).all(), col
    md = (workdir / "results/cifar/tables/table2.md").read_text()
    for label in ("Mahalanobis", "ReAct+Energy", "LLLA", "Epinet", "SWAG", "P&C", "Deep Ensemble"):
        assert f"| {label} |" in md
    metrics = pd.read_csv(workdir / "results/cifar/tables/metrics.csv")
    per_method = metrics[metrics.metric == "auroc"].groupby("method")["dataset"].nunique()
    assert (per_method == len(config["data"]["ood"])).all()
    cal = pd.read_csv(workdir / "results/cifar/tables/calibration.csv")
    assert set(cal["method"]) == set(config["methods"])
    assert cal["ece_mean"].between(0, 100).all() and cal["brier_mean"].between(0, 2).all()
    assert (cal["nll_mean"] > 0).all()
    aupr = pd.read_csv(workdir / "results/cifar/tables/aupr.csv")
    for col in ("near_aupr_in", "near_aupr_out", "far_aupr_in", "far_aupr_out"):
        assert aupr[f"{col}_mean"].between(0, 100).all(), col
    # the generated Far sets are a genuine shift: the feature-space score separates them
    maha = table.set_index("method").loc["mahalanobis"]
    assert maha["far_auroc_mean"] > 70, maha
    # P&C's coordinate descent: 2 blocks at the first sigma, then the second sigma at the best block
    sweep = pd.read_csv(workdir / "results/cifar/tables/sweep.csv")
    pnc = sweep[sweep.method == "pnc"]
    assert len(pnc) == 3 and pnc["selected"].sum() == 1
    selection = json.loads((workdir / "results/cifar/scores/seed0/pnc/selection.json").read_text())
    assert selection["val_nll"] == pytest.approx(pnc["val_nll"].min())
    assert math.isfinite(selection["temperature"])
    run = json.loads((workdir / "results/cifar/runs/seed0/base/run.json").read_text())
    assert len(run["history"]["loss"]) == config["train"]["epochs"]
    assert (workdir / "results/cifar/runs/seed0/base/checkpoint.msgpack").exists()
    for rule in ("train", "validate", "select", "posthoc"):
        assert list((workdir / "benchmarks/cifar" / rule).rglob("*.tsv")), rule
    # the selection stage: each method's choice per seed, from the sweep its validation job wrote
    chosen = json.loads((workdir / "results/cifar/selection/pnc.json").read_text())
    swept = json.loads((workdir / "results/cifar/validation/seed0/pnc.json").read_text())
    marked = chosen["seeds"]["0"]["sweep"]
    assert [{k: v for k, v in r.items() if k != "selected"} for r in marked] == swept["sweep"]
    assert marked == selection["sweep"] and sum(r["selected"] for r in marked) == 1
    # every record names its configuration by id, a key into the sweep the DAG wrote
    table = json.loads((workdir / "results/cifar/sweeps/pnc.json").read_text())
    assert [{k: table[r["id"]]["config"][k] for k in r["config"]} for r in marked] == [
        r["config"] for r in marked
    ]
    again = _snakemake(workdir, "-n", "--configfile", TINY)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]


def test_a_toy_method_follows_the_tiny_run_from_its_runs_to_the_tables(tiny_run, tmp_path):
    """A method registered outside the package (the toy of tests/test_methods_contract.py)
    runs through the tiny run's post-hoc jobs (its sweep, the selection stage, its scores) on that
    run's data and training runs, and the tables job reads it beside the configured methods: its
    row in Table 2 and its sweep, under its label."""
    import shutil

    from test_methods_contract import TOY_ENTRY, Tempered

    from pnc.methods import ood as registry
    from pnc.studies.cifar import jobs
    from pnc.studies.cifar.sweep import expand_sweep

    config = _effective(tiny_run, TINY)
    scores = tmp_path / "scores"
    shutil.copytree(tiny_run / "results/cifar/scores", scores)
    seed_job = dict(
        seed=0,
        sweep=tmp_path / "tempered.json",
        data_dir=tiny_run / "resources/cifar/data",
        runs_dir=tiny_run / "results/cifar/runs/seed0",
        model=config["model"],
        val_size=config["data"]["val_size"],
    )
    registry.register(Tempered())
    try:  # the workflow's sweep table, then the three jobs: the sweep, the selection, the scores
        expand_sweep("tempered", TOY_ENTRY).write(tmp_path / "tempered.json")
        jobs.validate(jobs.MethodJob(**seed_job, out=tmp_path / "validation.json"))
        chosen = jobs.select(
            sweep=tmp_path / "tempered.json",
            validation=[tmp_path / "validation.json"],
            out=tmp_path / "selection.json",
        )
        summary = jobs.posthoc(
            jobs.MethodJob(**seed_job, out=scores / "seed0/tempered"),
            selection=tmp_path / "selection.json",
        )
        assert [summary["id"]] == chosen["selected"]["0"]
        assert {"scale=0.5": {"scale": 0.5}, "scale=2": {"scale": 2.0}}[
            summary["id"]
        ] == summary["config"]
        methods = [*config["methods"], "tempered"]
        table = jobs.tables(
            scores_dir=scores,
            data_dir=tiny_run / "resources/cifar/data",
            methods=methods,
            seeds=config["seeds"],
            out=tmp_path / "tables",
        )
    finally:
        registry.unregister("tempered")
    assert table["method"].tolist()[-1] == "tempered" and set(table["method"]) == set(methods)
    assert table.set_index("method").loc["tempered", "acc_mean"] > 0
    assert "| Tempered |" in (tmp_path / "tables/table2.md").read_text()
    assert "| Tempered | scale | 0.5, 2.0 |" in (tmp_path / "tables/sweep.md").read_text()
    # the configured methods' rows are those of the tiny run itself
    before = pd.read_csv(tiny_run / "results/cifar/tables/table2.csv")
    after = pd.read_csv(tmp_path / "tables/table2.csv")
    pd.testing.assert_frame_equal(after[after.method != "tempered"].reset_index(drop=True), before)


#: A new CIFAR method's module: the logits of the base network and of a training run of its own
#: kind (``short<epochs>``: the config's recipe for fewer epochs), each scaled by each ``scale`` of
#: its grid, plus a fixed noise drawn from its key (after the toy of tests/test_methods_contract.py).
NEW_METHOD_MODULE = '''"""Tempered logits: a toy method."""

import dataclasses
import functools
from typing import ClassVar

import jax
import numpy as np

from pnc.core.classifier import model
from pnc.methods.ood.posthoc import MethodSection, PosthocMethod
from pnc.methods.ood.training_runs import RunKind

SHORT_RUN = RunKind("short", int, lambda epochs: {"epochs": epochs, "warmup_epochs": 0})


@dataclasses.dataclass(frozen=True)
class TemperedSection(MethodSection):
    grid_keys: ClassVar[tuple[str, ...]] = ("scale",)
    noise: float = 0.0
    short_epochs: int = 1


class TemperedDetector(PosthocMethod):
    id: ClassVar[str] = "tempered"
    label: ClassVar[str] = "Tempered"
    config_cls: ClassVar[type[MethodSection]] = TemperedSection
    run_kinds: ClassVar[tuple[RunKind, ...]] = (SHORT_RUN,)

    def runs_of(self, config):
        return ["base", SHORT_RUN.run_id(config.short_epochs)]

    def candidates(self, config, ctx, runs):
        members = [runs[r].variables for r in self.runs_of(config)]

        def build(scale):
            draw = jax.random.normal(self.key(ctx, scale), (ctx.config.num_classes,))
            noise = config.noise * np.asarray(draw)
            logits = lambda v, x: model.network_logits(v, x, ctx.config, ctx.batch_size)
            return lambda x: np.stack([logits(v, x) * scale + noise for v in members])

        return [({"scale": s}, functools.partial(build, s)) for s in config.values("scale")]
'''

#: The new method's block of workflow/schemas/cifar.schema.yaml.
NEW_METHOD_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["grid"],
    "properties": {
        "fixed": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "noise": {"type": "number", "minimum": 0},
                "short_epochs": {"type": "integer", "minimum": 1},
            },
        },
        "grid": {
            "type": "object",
            "additionalProperties": False,
            "required": ["scale"],
            "properties": {"scale": {"type": "array", "minItems": 1, "items": {"type": "number"}}},
        },
    },
}


def test_a_new_method_joins_the_tiny_run_with_four_files(tiny_run, tmp_path, monkeypatch):
    """A new method of the CIFAR study, with a kind of training run of its own, touches four files:
    its module and one registry line (in a copy of the package, first on the jobs'
    ``PYTHONPATH``), its schema block and its entry in the config (in a copy of the tiny run's
    workflow). Snakemake then trains its run and runs only the new method's jobs and the tables,
    on the tiny run's data and base run; the other rows stay as they were."""
    import shutil

    lib = tmp_path / "lib"
    shutil.copytree(ROOT / "pnc", lib / "pnc", ignore=shutil.ignore_patterns("__pycache__"))
    (lib / "pnc/methods/ood/tempered_detector.py").write_text(NEW_METHOD_MODULE)  # 1. its module
    init = lib / "pnc/methods/ood/__init__.py"  # 2. one registry line (and its import)
    text = init.read_text()
    last = "        EnergyDetector(),\n"
    assert text.count(last) == 1
    text = text.replace(last, last + "        TemperedDetector(),\n")
    registry_import = "from pnc.methods.registry import Registry\n"
    new_import = "from pnc.methods.ood.tempered_detector import TemperedDetector\n"
    text = text.replace(registry_import, new_import + registry_import)
    init.write_text(text)
    work = tmp_path / "work"
    shutil.copytree(tiny_run, work, symlinks=True)
    schema_path = work / "workflow/schemas/cifar.schema.yaml"  # 3. its schema block
    schema = yaml.safe_load(schema_path.read_text())
    schema["properties"]["methods"]["properties"]["tempered"] = NEW_METHOD_SCHEMA
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False))
    config = yaml.safe_load((work / TINY).read_text())  # 4. its config entry
    config["methods"]["tempered"] = {"fixed": {"noise": 0.1}, "grid": {"scale": [0.5, 2.0]}}
    (work / TINY).write_text(yaml.safe_dump(config, sort_keys=False))

    monkeypatch.setenv("PYTHONPATH", str(lib))
    proc = _snakemake(work, "--cores", "2", "--configfile", TINY, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    log = proc.stdout + proc.stderr  # the job stats: only the new method's jobs and the tables
    counts = dict(re.findall(r"^(cifar\w*)\s+(\d+)$", log, flags=re.M))
    assert counts == {
        "cifar_train": "1", "cifar_validate": "1", "cifar_select": "1", "cifar_posthoc": "1",
        "cifar_tables": "1", "cifar": "1",
    }, log[-3000:]  # fmt: skip
    short = json.loads((work / "results/cifar/runs/seed0/short1/run.json").read_text())
    assert short["run_id"] == "short1" and short["recipe"]["epochs"] == 1
    assert short["recipe"]["warmup_epochs"] == 0 and len(short["history"]["loss"]) == 1
    table = pd.read_csv(work / "results/cifar/tables/table2.csv")
    assert table["method"].tolist()[-1] == "tempered"
    assert "| Tempered |" in (work / "results/cifar/tables/table2.md").read_text()
    assert "| Tempered | scale | 0.5, 2.0 |" in (work / "results/cifar/tables/sweep.md").read_text()
    before = pd.read_csv(tiny_run / "results/cifar/tables/table2.csv")
    pd.testing.assert_frame_equal(table[table.method != "tempered"].reset_index(drop=True), before)


_JOB = dict(seed=1, data_dir="d", out="o", model={"width": 8}, val_size=100)
_SEED_JOB = ["--seed", "1", "--data", "d", "--out", "o", "--model", '{"width": 8}', "--val-size", "100"]
_METHOD_JOB = [*_SEED_JOB, "--sweep", "s.json", "--runs", "r"]
_METHOD_KW = dict(**_JOB, sweep="s.json", runs_dir="r", batch_size=500)
#: In ``expected`` below: the ``MethodJob`` of ``_METHOD_KW`` (made in the test).
_METHOD = "METHOD_JOB"


@pytest.mark.parametrize(
    ("stage", "module", "function", "argv", "expected"),
    [
        ("cifar_tiny_data", "jobs", "tiny_data", ["root", "--id", "cifar100"],
         (("root", {}, "cifar100"), {})),
        ("cifar_fetch", "fetch", "fetch", ["root", "--ood", "a", "b"],
         (("root", "cifar10", ["a", "b"]), {"overrides": {}})),
        ("cifar_data", "jobs", "prepare_data", ["root", "--ood", "a", "--out", "p", "--limit", "9"],
         (("root", ["a"], "p", 9, "cifar10"), {})),
        ("cifar_train", "jobs", "train_run", [*_SEED_JOB, "--run-id", "base", "--swag-starts", "3"],
         ((), dict(**_JOB, run_id="base", train_section={}, swag_starts=[3], checkpoint_every=10))),
        ("cifar_validate", "jobs", "validate", _METHOD_JOB, ((_METHOD,), {})),
        ("cifar_select", "jobs", "select", ["v0.json", "v1.json", "--sweep", "s.json", "--out", "o"],
         ((), dict(sweep="s.json", validation=["v0.json", "v1.json"], out="o"))),
        ("cifar_posthoc", "jobs", "posthoc", [*_METHOD_JOB, "--selection", "sel.json"],
         ((_METHOD,), {"selection": "sel.json"})),
    ],
)  # fmt: skip
def test_cifar_stages_limit_threads_then_call_their_job(
    monkeypatch, capsys, stage, module, function, argv, expected
):
    """Each CIFAR stage of the one stage table parses its options, limits its threads, then calls
    its one library function and prints the function's summary as JSON."""
    import importlib

    from pnc.workflow import commands

    calls = []
    stages = importlib.import_module("pnc.workflow.cifar_stages")
    monkeypatch.setattr(stages, "limit_threads", lambda n: calls.append(("limit", n)))
    job = lambda *a, **k: calls.append(("job", a, k)) or {"done": function}
    monkeypatch.setattr(importlib.import_module(f"pnc.studies.cifar.{module}"), function, job)
    assert commands.main([stage, "--threads", "2", *argv]) == 0
    from pnc.studies.cifar.jobs import MethodJob

    args = tuple(MethodJob(**_METHOD_KW) if a == _METHOD else a for a in expected[0])
    assert calls == [("limit", 2), ("job", args, expected[1])]
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"done": function}


def test_the_tables_stage_prints_the_methods_of_its_table(monkeypatch, capsys):
    import importlib

    from pnc.workflow import commands

    calls = []
    stages = importlib.import_module("pnc.workflow.cifar_stages")
    monkeypatch.setattr(stages, "limit_threads", lambda n: calls.append(("limit", n)))
    table = lambda **k: calls.append(("tables", k)) or pd.DataFrame({"method": ["msp", "pnc"]})
    monkeypatch.setattr(importlib.import_module("pnc.studies.cifar.jobs"), "tables", table)
    argv = ["--scores", "s", "--data", "d", "--methods", "msp", "pnc", "--seeds", "0", "1",
            "--out", "o", "--report", '{"std": "population"}']  # fmt: skip
    assert commands.main(["cifar_tables", "--threads", "1", *argv]) == 0
    assert calls == [
        ("limit", 1),
        ("tables", dict(scores_dir="s", data_dir="d", methods=["msp", "pnc"], seeds=[0, 1],
                        out="o", report={"std": "population"})),
    ]  # fmt: skip
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {
        "methods": ["msp", "pnc"]
    }


def test_schema_lists_exactly_the_methods_of_the_library():
    from pnc.methods.ood import METHOD_IDS
    from pnc.studies.cifar.data import ID_DATASETS

    schema = yaml.safe_load((ROOT / "workflow/schemas/cifar.schema.yaml").read_text())
    assert set(schema["properties"]["methods"]["properties"]) == set(METHOD_IDS)
    assert schema["properties"]["evaluate"]["items"]["enum"] == list(METHOD_IDS)
    data = schema["properties"]["data"]["properties"]
    assert data["id"]["enum"] == list(ID_DATASETS)
    assert data["ood"]["items"]["enum"] == list(dict.fromkeys(n for d in ID_DATASETS.values() for n in d.ood))  # fmt: skip
    paper = yaml.safe_load((ROOT / "config/cifar.yaml").read_text())
    assert set(paper["methods"]) == set(METHOD_IDS) and paper["seeds"] == [0, 1, 2, 3, 4]
    assert paper["report"] == {"std": "sample", "fpr95": "own"}


def test_cifar100_and_the_authors_reporting_dry_run(workdir):
    proc = _snakemake(workdir, "-n", "-p", "--configfile", "config/cifar100.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "--id cifar100" in proc.stdout and "--ood cifar10 tin mnist" in proc.stdout
    assert "resources/cifar/data/cifar100.npz" in proc.stdout
    for files in (
        ["config/cifar_authors.yaml"],
        ["config/cifar.yaml", "config/cifar_authors.yaml"],
    ):
        proc = _snakemake(workdir, "-n", "-p", "--configfile", *files)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "--seeds 0 1 2 " in proc.stdout
        assert """--report '{"fpr95": "authors", "std": "population"}'""" in proc.stdout


def test_smoke_config_is_full_width_and_paper_sized_pnc(workdir):
    smoke = _effective(workdir, "config/cifar_smoke.yaml")
    paper = yaml.safe_load((workdir / "config/cifar.yaml").read_text())
    assert smoke["model"] == paper["model"]
    pnc = smoke["methods"]["pnc"]["fixed"]
    assert (pnc["n_members"], pnc["rank"]) == (50, 20) and set(smoke["methods"]) == set(paper["methods"])  # fmt: skip
    proc = _snakemake(workdir, "-n", "--configfile", "config/cifar_smoke.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_gpu_check_config_runs_every_method_at_full_width_with_shared_gpus(workdir):
    """config/cifar_gpu_check.yaml: the paper's network and batch, every method to Table 2, one
    seed; its DAG builds with `--resources gpu=8` (the jobs share the GPU:
    test_jobs_allocate_gpu_memory_as_needed_unless_the_user_says)."""
    check = _effective(workdir, "config/cifar_gpu_check.yaml")
    paper = yaml.safe_load((workdir / "config/cifar.yaml").read_text())
    assert check["model"] == paper["model"] and check["train"]["batch_size"] == 128
    assert set(check["methods"]) == set(paper["methods"]) and check["seeds"] == [0]
    assert check["data"]["tiny"] and check["train"]["epochs"] <= 3
    args = ("-n", "--cores", "16", "--resources", "gpu=8", "--configfile", "config/cifar_gpu_check.yaml")  # fmt: skip
    proc = _snakemake(workdir, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(cifar\w*)\s+(\d+)$", proc.stdout, flags=re.M))
    assert (counts["cifar_train"], counts["cifar_posthoc"], counts["cifar_tables"]) == ("3", "10", "1")  # fmt: skip


def test_gpu_check_script_stops_at_once_without_a_gpu():
    """scripts/cifar_gpu_check.sh runs on the machine's own JAX: where that JAX finds no GPU it
    stops before any job, saying so."""
    proc = subprocess.run(
        ["bash", "scripts/cifar_gpu_check.sh", "-n"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "finds no GPU" in proc.stderr and "snakemake" not in proc.stdout
