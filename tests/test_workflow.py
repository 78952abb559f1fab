"""The Snakemake workflow: one stage convention for every rule's command, lint, the paper protocol's
DAG, the SLURM profile, config validation, atomic outputs, and the tiny CI configuration end to end
in a temporary copy. The whole module is in the ``slow`` tier: its tests run Snakemake (or a stage)
in subprocesses, several seconds each; the cross-key config checks are unit-tested in
``test_config_check.py``."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config
from workflow_copy import config_error, copy_workflow
from workflow_copy import job_counts as _job_counts
from workflow_copy import run_snakemake as _snakemake

from pnc.runtime.io import atomic_path

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
RULE_FILES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# a rule's command, after an optional GLIBC_TUNABLES for its job alone (pnc.runtime.allocator)
STAGE = re.compile(
    r'(?:GLIBC_TUNABLES="[^"]*" )?python -m pnc\.workflow (\w+) --threads \{threads\}(?= |$)'
)


def _copy_workflow(dest: Path) -> Path:
    """A copy of what the workflow needs (the package itself is installed)."""
    dirs = ("workflow", "config", ".test", "envs", "profiles")
    return copy_workflow(dest, dirs, ("Snakefile", "config.yaml"))


def _rules(text: str) -> dict[str, dict[str, str]]:
    """``rule name -> {directive: its text}`` of a rules file (directives 4 spaces deeper than their
    rule, bodies deeper). A rule defined in both branches of an ``if`` on the config (the full and
    the two-phase evaluation's ``select``) is listed as ``name`` and ``name@2``."""
    rules: dict[str, dict[str, str]] = {}
    for block in re.split(r"^(?=[ ]*rule )", text, flags=re.M)[1:]:
        indent, name = re.match(r"([ ]*)rule (\w+):", block).groups()
        first, *lines = block.split("\n")
        end = next(
            (
                i
                for i, line in enumerate(lines)
                if line.strip() and not line.startswith(indent + " ")
            ),
            len(lines),
        )  # the rule ends at the first line not indented deeper than it
        block = "\n".join([first, *lines[:end]])
        parts = re.split(rf"^{indent}    (\w+):[ \t]*", block, flags=re.M)[1:]
        label = name if name not in rules else f"{name}@2"
        rules[label] = {k: body.strip() for k, body in zip(parts[::2], parts[1::2], strict=True)}
    return rules


def _shell_commands() -> dict[str, str]:
    """Every rule's shell command, its adjacent string literals joined as Python joins them."""
    commands = {}
    for path in RULE_FILES:
        for name, directives in _rules(path.read_text()).items():
            if "shell" in directives:
                commands[name] = ast.literal_eval(f"({directives['shell']})")
    return commands


def _calls_in_order(function: ast.FunctionDef) -> list[str]:
    """Names of the functions called and modules imported in ``function``, in source order."""
    events = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            events.append((node.lineno, node.col_offset, node.func.id))
        elif isinstance(node, ast.ImportFrom | ast.Import):
            events.append((node.lineno, node.col_offset, "import"))
    return [name for *_, name in sorted(events)]


def _command_builders() -> dict[str, str]:
    """``builder -> stage`` of common.smk's command builders (``def X_command(...)`` whose body
    calls ``stage_command("STAGE", threads, ...)``)."""
    text = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    builders = {}
    for block in re.split(r"^(?=def )", text, flags=re.M):
        name = re.match(r"def (\w+_command)\(", block)
        stage = re.search(r'stage_command\(\s*"(\w+)", threads', block)
        if name and stage:
            builders[name.group(1)] = stage.group(1)
    return builders


def test_every_rule_runs_a_thread_limited_stage():
    """``python -m pnc.workflow STAGE --threads {threads} ...``, or a command that common.smk builds
    (``{params.command}``: one stage's, or the ``batch`` of several); the stage limits its threads
    first."""
    from pnc.workflow.commands import STAGES, Forward

    commands = _shell_commands()
    assert {
        "train", "train_env", "evaluate", "evaluate_env", "evaluate_test", "evaluate_test_env",
        "splits", "select", "select@2", "assemble", "report_tables", "report_metrics",
    } <= set(commands)  # fmt: skip
    builders = _command_builders()
    assert builders == {
        "train_command": "train_run",
        "evaluate_command": "evaluate_run",
        "test_command": "evaluate_test",
        "report_tables_command": "report_tables",
        "figure_command": "report_figure",
        "mechanism_figures_command": "mechanism_report",
        "mechanism_table_command": "mechanism_report",
    }
    rules = {
        name: directives
        for path in RULE_FILES
        for name, directives in _rules(path.read_text()).items()
    }
    stages = {}
    for rule, command in commands.items():
        if command == "python -m pnc.workflow {params.command} > {log:q} 2>&1":
            params = rules[rule]["params"]
            used = [b for b in builders if re.search(rf"\b{b}\(", params)]
            # a rule of config `batch: env` joins its stages with batch_command, another runs one
            batched = rule.endswith(("_env", "_batch"))
            assert ("batch_command(" in params) == batched, rule
            assert used and (batched or len(used) == 1), f"rule {rule}: {params!r}"
            assert "threads" in params.split(":", 1)[0], rule  # given the job's threads
            for k, builder in enumerate(used):
                stages[rule if k == 0 else f"{rule}#{k}"] = builders[builder]
            continue
        match = STAGE.match(command)
        assert match, f"rule {rule}: {command!r}"
        stages[rule] = match.group(1)
    for path in [*RULE_FILES, ROOT / "Snakefile"]:
        text = path.read_text()
        assert "OMP_NUM_THREADS" not in text and "pinned" not in text, path

    functions = {}
    for module in ("pnc.workflow.commands", "pnc.workflow.cifar_stages"):  # the stages' modules
        source = ast.parse(Path(importlib.import_module(module).__file__).read_text())
        functions[module] = {n.name: n for n in source.body if isinstance(n, ast.FunctionDef)}
    for rule, stage in stages.items():
        assert stage in STAGES, f"rule {rule}: no stage {stage!r} in pnc.workflow.commands.STAGES"
        if isinstance(STAGES[stage], Forward):  # limits the threads first (test_forwarding_...)
            continue
        main = functions[STAGES[stage].__module__][STAGES[stage].__name__]
        calls = _calls_in_order(main)
        assert "limit_threads" in calls, stage
        # before the library is imported (and so before any JAX computation)
        assert "import" not in calls[: calls.index("limit_threads")], stage
        limit = next(
            n
            for n in ast.walk(main)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "limit_threads"
        )
        assert ast.unparse(limit.args[0]) == "args.threads", stage


def test_short_lived_stages_start_with_the_prefix_the_library_defines():
    """A rule that sets GLIBC_TUNABLES for its job sets it as pnc.runtime.allocator.SHELL_PREFIX does (its
    braces doubled for Snakemake's formatting), for the stages in pnc.runtime.allocator.SHORT_LIVED."""
    from pnc.runtime.allocator import SHELL_PREFIX, SHORT_LIVED

    prefix = SHELL_PREFIX.replace("{", "{{").replace("}", "}}")
    without = set()
    for command in _shell_commands().values():
        if command.startswith("GLIBC_TUNABLES="):
            assert command.startswith(prefix), command
            without.add(STAGE.match(command).group(1))
    assert without == set(SHORT_LIVED)


def test_every_rule_with_a_command_has_log_benchmark_and_threads():
    for path in RULE_FILES:
        for name, directives in _rules(path.read_text()).items():
            if "shell" in directives:
                assert {"log", "benchmark", "threads"} <= set(directives), (path.name, name)
                assert "{log:q}" in directives["shell"], (path.name, name)


def test_upstream_jobs_and_the_mechanism_chain_go_before_training_and_evaluation():
    """Data, splits, selection and the mechanism chain run as soon as they are ready: their
    priority is above every training and evaluation job's (the size of its work)."""
    rules = {}
    for path in RULE_FILES:
        rules.update(_rules(path.read_text()))
    upstream = {"behaviour_policies", "offline_data", "minari_data", "far_data", "splits"}
    for name in upstream - {"minari_data"} | {
        "select",
        "select@2",
        "assemble",
        "pnc_members",
        "mechanism",
    }:
        assert rules[name].get("priority") == "UPSTREAM_PRIORITY", name
    # the downloads go first of all
    assert rules["minari_data"]["priority"] == "DOWNLOAD_PRIORITY"
    assert rules["train"]["priority"] == "training_priority"
    assert rules["evaluate"]["priority"] == "evaluation_priority"
    assert rules["evaluate_test"]["priority"] == "TEST_PRIORITY"
    common = (ROOT / "workflow/rules/common.smk").read_text()
    line = next(t for t in common.splitlines() if t.startswith("UPSTREAM_PRIORITY = "))
    assert "EVALUATION_WORK.values()" in line and "TRAINING_WORK.values()" in line
    assert "TEST_PRIORITY" in line
    assert line.startswith("UPSTREAM_PRIORITY = 1 + max(")
    assert "\nDOWNLOAD_PRIORITY = UPSTREAM_PRIORITY + 1\n" in common


@pytest.mark.parametrize(
    ("stage", "library", "argv", "expected"),
    [
        (
            "behaviour_policies",
            "pnc.studies.mujoco.data.behaviour",
            ["Ant", "--out", "p", "--seed", "3"],
            None,
        ),
        (
            "offline_data",
            "pnc.studies.mujoco.data.offline",
            ["Ant", "--transitions", "10", "--force"],
            None,
        ),
        (
            "far_data",
            "pnc.studies.mujoco.data.far",
            ["Ant", "--minari-root", "m", "--transitions", "5"],
            None,
        ),
        (
            "episode_splits",
            "pnc.studies.mujoco.data.__main__",
            ["Ant", "--seed", "0", "--out", "s"],
            None,
        ),
        (
            "report_tables",
            "pnc.report.__main__",
            ["r.csv", "--out", "t"],
            ["tables", "r.csv", "--out", "t"],
        ),
        ("report_figure", "pnc.report.__main__", ["metrics", "r.csv", "--env", "Ant"], None),
    ],
)
def test_library_stages_forward_their_arguments(monkeypatch, stage, library, argv, expected):
    """Everything after ``--threads N`` reaches the library's ``main``, in order, after the limit."""
    from pnc.workflow import commands

    calls = []
    limit = lambda n: calls.append(("limit", n))
    monkeypatch.setattr(importlib.import_module("pnc.runtime.stage"), "limit_threads", limit)
    monkeypatch.setattr(
        importlib.import_module(library), "main", lambda a: calls.append(("main", a)) or 7
    )
    assert commands.main([stage, "--threads", "2", *argv]) == 7
    assert calls == [("limit", 2), ("main", argv if expected is None else expected)]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return _copy_workflow(tmp_path_factory.mktemp("workflow"))


def test_lint_is_clean(workdir):
    proc = _snakemake(workdir, "--lint", "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def _stage_commands(workdir: Path, *args: str) -> tuple[list[str], dict[str, int]]:
    """The commands a dry run of the quick default would run, each ``STAGE ARGS`` (a ``batch``
    split into its stages), and the job counts."""
    from pnc.workflow.commands import BATCH_SEPARATOR

    proc = _snakemake(workdir, "-n", "-p", "--configfile", "config/quick.yaml", *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    commands = []
    for line in proc.stdout.splitlines():
        words = line.split("python -m pnc.workflow ", 1)
        if len(words) == 2:
            command = re.sub(r" > \S+ 2>&1$", "", words[1].strip())
            if command.startswith("batch "):
                commands += command.removeprefix("batch ").split(f" {BATCH_SEPARATOR} ")
            else:
                commands.append(command)
    return commands, _job_counts(proc.stdout)


@pytest.mark.parametrize("evaluation", ["two_phase", "full"])
def test_batched_jobs_run_the_same_commands(workdir, evaluation):
    """Config `batch: env` runs exactly the stages of `batch: none`, fewer processes: one training,
    one validation-phase and one test-phase job per environment instead of one per (seed, run),
    (seed, method, run) and seed, and one job for the report and one for the mechanism figures
    and table instead of one per table or figure."""
    single, single_jobs = _stage_commands(
        workdir, "--config", "batch=none", f"evaluation={evaluation}"
    )
    batched, batched_jobs = _stage_commands(
        workdir, "--config", "batch=env", f"evaluation={evaluation}"
    )
    assert sorted(batched) == sorted(single)
    assert len(set(single)) == len(single) > 30
    n_envs, n_seeds = 2, 2
    assert batched_jobs["train_env"] == batched_jobs["evaluate_env"] == n_envs
    assert single_jobs["train"] == n_envs * n_seeds * 4  # base, ensemble, dropout, subspace
    assert single_jobs["evaluate"] == n_envs * n_seeds * 8
    if evaluation == "two_phase":
        assert batched_jobs["evaluate_test_env"] == n_envs
        assert single_jobs["evaluate_test"] == n_envs * n_seeds
    else:
        assert "evaluate_test_env" not in batched_jobs and "evaluate_test" not in single_jobs
    report_rules = {"report_tables", "report_frontier_overview", "report_frontier", "report_metrics"}
    mechanism_rules = {"mechanism_figures", "mechanism_table"}
    assert sum(single_jobs[r] for r in report_rules) == 2 + 2 * n_envs
    assert sum(single_jobs[r] for r in mechanism_rules) == 1 + n_envs
    assert batched_jobs["report_batch"] == batched_jobs["mechanism_report_batch"] == 1
    moved = {"train", "evaluate", "evaluate_test", "train_env", "evaluate_env", "evaluate_test_env"}
    moved |= report_rules | mechanism_rules | {"report_batch", "mechanism_report_batch"}
    rest = {k: v for k, v in single_jobs.items() if k not in moved | {"total"}}
    assert rest == {k: v for k, v in batched_jobs.items() if k not in moved | {"total"}}


@pytest.mark.parametrize("evaluation", ["two_phase", "full"])
def test_paper_protocol_dag(workdir, evaluation):
    """config.yaml: 11 envs x 10 seeds; 8 training runs and 12 (method, run) jobs per (env, seed);
    with the two-phase evaluation (the default) also a test phase per (env, seed, method) and the
    assembly of each environment's tables."""
    extra = [] if evaluation == "two_phase" else ["--config", "evaluation=full"]
    proc = _snakemake(workdir, "-n", "--configfile", "config.yaml", *extra)
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = _job_counts(proc.stdout)
    n_env, n_seed = 11, 10
    # runs: base, deep_ensemble-n_members5, mc_dropout x 5 rates, subspace's own run
    # evaluation jobs: pnc, pnc_nocorr, swag, laplace (base), subspace, deep_ensemble and its
    # mixture reading (one shared run), 5 x mc_dropout; the test phase: one per (env, seed)
    phases = (
        {"evaluate_test": n_env * n_seed, "assemble": n_env} if evaluation == "two_phase" else {}
    )
    expected = {
        "minari_data": n_env,
        "far_data": n_env * n_seed,  # Far data are collected fresh per seed
        "splits": n_env * n_seed,
        "train": n_env * n_seed * 8,
        "evaluate": n_env * n_seed * 12,
        **phases,
        "select": n_env,
        "aggregate": 1,
        "report_tables": 1,
        "report_frontier_overview": 1,
        "report_frontier": n_env,
        "report_metrics": n_env,
        # the mechanism evidence on the first seed (config mechanism.seeds)
        "pnc_members": n_env,
        "mechanism": n_env,
        "mechanism_figures": n_env,
        "mechanism_table": 1,
        "all": 1,
    }
    assert {k: v for k, v in counts.items() if k != "total"} == expected
    # every P&C grid point is evaluated: 3 sigma x 4 bootstrap fractions x 2 ridges, each read
    # by id from P&C's grid table, which the DAG wrote
    pnc_job = re.search(
        r"--method pnc --run-id base .*?--grid (\S+) --configs (.*?) --calibrations", proc.stdout
    )
    table = json.loads((workdir / pnc_job.group(1)).read_text())
    ids = shlex.split(pnc_job.group(2))
    assert pnc_job.group(1) == "results/grid/pnc.json" and len(ids) == 3 * 4 * 2
    assert ids == list(table) and {r["config"]["sigma"] for r in table.values()} == {8, 16, 32}
    # the two-phase evaluation scores every configuration on val and the frontier sample first
    scored = re.search(r"--method pnc --run-id base .*?--out (\S+)", proc.stdout)
    if evaluation == "two_phase":
        assert "--score val id_sample far_sample --posteriors results/validation/" in scored.group(
            0
        )
        assert scored.group(1).startswith("results/validation/")
    else:
        assert "--score" not in scored.group(0) and scored.group(1).startswith("results/metrics/")
    # the mechanism job declares every run it reads: the base run and Subspace's own run (a
    # study restored from pieces, with no run on disk, makes them before the mechanism job)
    mechanism = re.search(
        r"Job \d+: Mechanism diagnostics of Ant, seed 0\nReason: ([^\n]*)", proc.stdout
    )
    runs = set(
        re.findall(r"results/runs/Ant/seed0/([^/]+)/run\.(?:json|msgpack)", mechanism.group(1))
    )
    assert runs == {"base", "subspace-every50-snapshots20-start1000-steps2000"}
    # ... and, two-phase, restores Subspace's chain from the validation phase instead of running it
    command = re.search(r"mechanism_diagnostics [^\n]*--env Ant --seed 0 [^\n]*", proc.stdout)
    stored = "results/validation/Ant/seed0/subspace/" + (
        "subspace-every50-snapshots20-start1000-steps2000.npz"
    )
    if evaluation == "two_phase":
        assert stored in mechanism.group(1)
        assert " --validation results/validation/Ant/seed0 " in command.group(0)
    else:
        assert "--validation" not in command.group(0)


def test_authors_settings_dag(workdir):
    """config/offline_authors.yaml: P&C and its ablation on their own 2,000-step base run (one
    more training run per (env, seed)), every other method on the shared runs; the mechanism job
    reads P&C's run beside the shared one (SWAG, Laplace) and Subspace's."""
    proc = _snakemake(workdir, "-n", "--configfile", "config/offline_authors.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = _job_counts(proc.stdout)
    assert counts["train"] == 11 * 10 * 9 and counts["evaluate"] == 11 * 10 * 12
    own = re.search(r"--run-id base-steps2000 --spec '([^']*)'", proc.stdout)
    assert json.loads(own.group(1)) == {"kind": "base", "options": [["steps", 2000]]}
    for method, run in (("pnc", "base-steps2000"), ("pnc_nocorr", "base-steps2000"),
                        ("swag", "base"), ("laplace", "base")):  # fmt: skip
        assert re.search(rf"--method {method} --run-id {run} ", proc.stdout), method
    pnc_job = re.search(r"--method pnc --run-id base-steps2000 .*?--grid (\S+) ", proc.stdout)
    table = json.loads((workdir / pnc_job.group(1)).read_text())
    assert {r["calibration_pool"] for r in table.values()} == {"id_pool"}
    assert {r["run_id"] for r in table.values()} == {"base-steps2000"}
    mechanism = re.search(
        r"Job \d+: Mechanism diagnostics of Ant, seed 0\nReason: ([^\n]*)", proc.stdout
    )
    runs = set(
        re.findall(r"results/runs/Ant/seed0/([^/]+)/run\.(?:json|msgpack)", mechanism.group(1))
    )
    assert runs == {"base", "base-steps2000", "subspace-every50-snapshots20-start1000-steps2000"}


def test_one_environment_target(workdir):
    target = "results/envs/Hopper/results.csv"  # before --configfile, which takes several values
    proc = _snakemake(workdir, "-n", target, "--configfile", "config.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    counts = _job_counts(proc.stdout)
    assert counts["train"] == 10 * 8 and counts["evaluate"] == 10 * 12 and counts["select"] == 1
    assert counts["evaluate_test"] == 10 and counts["assemble"] == 1
    assert "aggregate" not in counts and "Ant" not in proc.stdout


def test_slurm_profile_resolves(workdir):
    profile = workdir / "profiles" / "slurm"
    proc = _snakemake(workdir, "-n", "--profile", str(profile), "--configfile", ".test/config.yaml")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "profiles/slurm" in proc.stdout + proc.stderr
    assert _job_counts(proc.stdout)["train"] == 4  # base, deep ensemble, dropout, subspace
    settings = yaml.safe_load((profile / "config.yaml").read_text())
    assert settings["executor"] == "slurm"
    # the plugin requests --cpus-per-task = threads only when no cpus_per_task resource is set
    assert "cpus_per_task" not in settings.get("default-resources", {})
    assert {"mem_mb", "runtime"} <= set(settings["default-resources"])  # rules declaring none
    rules = _snakemake(workdir, "--list-rules", "--configfile", ".test/config.yaml")
    names = set(rules.stdout.split())
    assert set(settings.get("set-resources", {})) <= names


def test_rules_declare_memory_and_runtime_from_the_config():
    """Every data, training, evaluation and report rule takes mem_mb and runtime from `resources`."""
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text())
    stages = schema["properties"]["resources"]["properties"]
    declared = {}
    for path in RULE_FILES:
        for name, directives in _rules(path.read_text()).items():
            found = re.findall(
                r'(mem_mb|runtime)=RESOURCES\["(\w+)"\]\["\1"\]', directives.get("resources", "")
            )
            if found:
                assert {key for key, _ in found} == {"mem_mb", "runtime"}, name
                assert {stage for _, stage in found} <= set(stages), name
                declared[name] = found[0][1]
    assert {
        "behaviour_policies",
        "offline_data",
        "minari_data",
        "far_data",
        "splits",
        "train",
        "evaluate",
        "evaluate_test",
        "assemble",
        "report_tables",
        "report_frontier_overview",
        "report_frontier",
        "report_metrics",
        "select",
        "aggregate",
    } <= set(declared)
    for stage, spec in stages.items():
        assert set(spec["default"]) == {"mem_mb", "runtime"}, stage
        assert all(isinstance(v, int) and v > 0 for v in spec["default"].values()), stage
    assert stages["policies"]["default"]["runtime"] >= 8 * 60  # ARS: hours


def test_jax_stages_declare_their_gpus_from_the_config():
    """The training, evaluation and mechanism rules take `gpu` from `resources` (one GPU each when
    config `device` is gpu, else none; test_device_sets_the_jobs_platform_and_gpus); the study's
    other rules declare none."""
    declared = {}
    for path in RULE_FILES:
        for name, directives in _rules(path.read_text()).items():
            stages = re.findall(
                r'gpu=RESOURCES\["(\w+)"\]\["gpu"\]', directives.get("resources", "")
            )
            if stages:
                runtime = re.findall(r'runtime=RESOURCES\["(\w+)"\]', directives["resources"])
                assert stages == runtime, name  # the stage of its memory and wall time
                declared[name] = stages[0]
    assert declared == {
        "train": "train",
        "train_env": "train",
        "evaluate": "evaluate",
        "evaluate_env": "evaluate",
        "evaluate_test": "evaluate",
        "evaluate_test_env": "evaluate",
        "pnc_members": "mechanism",
        "mechanism": "mechanism",
    }


def _bad_config(workdir, tmp_path, change, whole=False) -> Path:
    """The tiny config changed by ``change``, written to a file. The tiny config is an overlay of
    config.yaml; ``whole``: the merged config, to be passed with --replace-workflow-config as the
    whole config (an overlay cannot remove a key)."""
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    if whole:
        merged = yaml.safe_load((workdir / "config.yaml").read_text())
        update_config(merged, config)
        config = merged
    config.setdefault("resources", {})
    change(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _rejected_config_message(workdir, tmp_path, change, whole=False) -> str:
    """The workflow's DAG built in this process on the changed config must stop with a
    WorkflowError (Snakemake prints its message alone, no traceback); returns the message.
    ``test_a_rejected_config_prints_its_message_alone`` checks what the command line prints."""
    path = _bad_config(workdir, tmp_path, change, whole)
    err = config_error(workdir, "Snakefile", path, replace=whole)
    assert isinstance(err, WorkflowError), repr(err)
    return str(err)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda c: c.update(envs=["Cartpole"]), ["envs", "InvertedPendulum"]),
        (lambda c: c["data"].update(source="d4rl"), ["source", "minari", "offline"]),
        (lambda c: c["methods"].update(bayes_by_backprop={}), ["bayes_by_backprop", "laplace"]),
        (lambda c: c["methods"]["swag"]["grid"].update(scal=[1.0]), ["swag", "scal", "scale"]),
        (lambda c: c["train"].update(steps=0), ["steps"]),
        (lambda c: c.update(seed=[0]), ["seed"]),
        (lambda c: c.update(run_methods=["pnc", "swagg"]), ["run_methods[1]", "swagg", "swag"]),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(layers=[0, 5]),
            ["methods.pnc.layers", "(0, 5)", "model.hidden"],
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(calibration_size=5000),
            [
                "calibration_size",
                "5000",
                "900 rows",
                "the train rows",
                "data.transitions_per_regime",
            ],
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(perturbation_norm="ball"),
            ["perturbation_norm", "gaussian", "radius", "ball"],
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(ridge_center="one"),
            ["ridge_center", "original", "zero"],
        ),
        (lambda c: c.update(variance_calibration=["raw", "cal"]), ["cal", "raw", "vcal"]),
        (lambda c: c.update(device="tpu"), ["device", "tpu", "cpu", "gpu"]),
        (lambda c: c["resources"].update(train={"gpu": -1}), ["resources", "train", "gpu"]),
        (
            lambda c: c["data"].update(far_transitions=500),
            ["data.far_transitions = 500", "data.transitions_per_regime = 1000"],
        ),
        (
            lambda c: c["data"].update(offline_transitions=1200),
            ["data.offline_transitions = 1200", "data.id_transitions = 500"],
        ),
        (lambda c: c["data"].update(target="reward"), ["data.target", "next_state", "delta"]),
        (lambda c: c["model"].update(variance="exp"), ["model.variance", "softplus"]),
        (lambda c: c["train"].update(patience=0), ["train.patience = 0", ">= 1"]),
        (
            lambda c: c["data"].update(max_train=100),
            ["data", "max_train", "transitions_per_regime"],
        ),
        (
            lambda c: c["model"].update(min_logvar=2.0, max_logvar=-1.0),
            ["model.min_logvar = 2.0", "model.max_logvar = -1.0"],
        ),
        (
            # layer 0 of InvertedPendulum: (4 obs + 1 action) x 32 = 160
            lambda c: c["methods"]["pnc"]["fixed"].update(rank=161),
            ["methods.pnc.rank = 161", "layer 0", "160", "model.hidden[0]"],
        ),
        (
            lambda c: c["methods"]["pnc_nocorr"]["fixed"].update(rank=2000, layers=[1]),
            ["methods.pnc_nocorr.rank = 2000", "layer 1", "model.hidden[0]", "1024"],
        ),
        (lambda c: c["train"].update(steps=100), ["train.collection", "100 steps", "swag"]),
        (
            lambda c: c["methods"]["subspace"]["fixed"].update(trajectory_steps=50),
            ["methods.subspace", "trajectory_steps", "50 steps"],
        ),
        (lambda c: c["resources"].update(train={"mem_mb": 0}), ["resources.train.mem_mb", "0"]),
        (lambda c: c["mechanism"].update(seeds=[3]), ["mechanism.seeds", "[3]", "seeds = [0]"]),
        (lambda c: c["mechanism"].update(probe_eps=0), ["mechanism.probe_eps", "0"]),
    ],
    ids=[
        "env",
        "source",
        "method",
        "hyperparameter",
        "steps",
        "unknown-top-level",
        "run-methods",
        "pnc-layers",
        "calibration-size",
        "perturbation-norm",
        "ridge-center",
        "variance-calibration",
        "device",
        "gpu-count",
        "far-pool",
        "offline-pool",
        "target",
        "variance-link",
        "patience",
        "removed-key",
        "logvar-bounds",
        "pnc-rank",
        "pnc-nocorr-rank-deeper-layer",
        "swag-snapshots",
        "subspace-snapshots",
        "resources",
        "mechanism-seeds",
        "mechanism-probe-eps",
    ],
)
def test_bad_config_is_rejected_naming_the_key(workdir, tmp_path, change, named):
    message = _rejected_config_message(workdir, tmp_path, change)
    for word in named:
        assert word in message, message[-3000:]
    assert len(message.splitlines()) < 30, message[-3000:]


@pytest.mark.parametrize(
    ("change", "whole", "named"),
    [
        (lambda c: c.update(envs=["Cartpole"]), False, ["envs[0] = 'Cartpole'"]),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(layers=[0, 5]),
            False,
            ["methods.pnc.layers", "model.hidden"],
        ),
        (lambda c: c.pop("envs"), True, ["(top level): missing required key(s) envs"]),
    ],
    ids=["schema", "across-keys", "whole-config"],
)
def test_a_rejected_config_prints_its_message_alone(workdir, tmp_path, change, whole, named):
    """On the command line (``snakemake -n``): a non-zero exit, the message, no job planned, no
    traceback, no schema or config dump."""
    path = _bad_config(workdir, tmp_path, change, whole)
    flags = ["--replace-workflow-config"] if whole else []
    proc = _snakemake(workdir, "-n", *flags, "--configfile", str(path))
    message = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for word in named:
        assert word in message, message[-3000:]
    assert "Job stats" not in message  # rejected before any job is planned
    assert "Traceback" not in message and "additionalProperties" not in message
    assert len(message.splitlines()) < 30, message[-3000:]


@pytest.mark.parametrize(
    ("change", "lines"),
    [
        (lambda c: c.pop("envs"), ["(top level): missing required key(s) envs"]),
        (
            lambda c: c.update(plots={"dpi": 300}),
            ["(top level): unknown key(s) plots; allowed: envs, seeds, data"],
        ),
        (
            lambda c: (c.pop("seeds"), c["data"].update(val_fraction=1.5), c.update(extra=1)),
            [
                "(top level): missing required key(s) seeds",
                "(top level): unknown key(s) extra; allowed:",
                "data.val_fraction = 1.5: must be < 1",
            ],
        ),
    ],
    ids=["missing-envs", "unknown-top-level-key", "several"],
)
def test_schema_violations_are_one_line_each(workdir, tmp_path, change, lines):
    """One line per violation (key path, value, what is allowed), not the schema and config dump."""
    message = _rejected_config_message(workdir, tmp_path, change, whole=True)
    assert f"invalid config ({len(lines)} problem(s)" in message, message[-3000:]
    for line in lines:
        assert line in message, message[-3000:]
    assert len(message.splitlines()) < 30, message[-3000:]
    assert "additionalProperties" not in message and "InvertedPendulum" not in message


def test_config_defaults_are_filled_in(workdir, tmp_path):
    """Keys left out take the schema's defaults, a stage's resources key by key."""
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    config["resources"] = {"evaluate": {"mem_mb": 1234}}
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(config))
    probe = workdir / "probe.smk"
    probe.write_text(
        'include: "Snakefile"\n\n\n'
        "print(\"PROBE\", json.dumps({'resources': RESOURCES, 'threads': config['threads'],"
        " 'data': config['data']}))\n"
    )
    try:
        proc = _snakemake(workdir, "-s", "probe.smk", "-n", "--configfile", str(path))
    finally:
        probe.unlink()
    assert proc.returncode == 0, proc.stderr[-3000:]
    probed = json.loads(proc.stdout.split("PROBE ", 1)[1].splitlines()[0])
    assert probed["resources"]["evaluate"] == {"mem_mb": 1234, "runtime": 180, "gpu": 0}
    assert probed["resources"]["train"] == {"mem_mb": 8000, "runtime": 60, "gpu": 0}
    assert probed["data"]["val_fraction"] == 0.1 and probed["data"]["retrain_policies"] is False


def _probe_device(workdir, tmp_path, device, resources, environ) -> dict:
    """The GPUs per stage and the jobs' JAX variables the workflow sets for config ``device``."""
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    config.update(device=device, resources=resources)
    path = tmp_path / f"{device}.yaml"
    path.write_text(yaml.safe_dump(config))
    probe = workdir / "probe_device.smk"
    probe.write_text(
        'include: "Snakefile"\n\n\n'
        "print(\"PROBE\", json.dumps({'gpu': {k: v['gpu'] for k, v in RESOURCES.items()},"
        " 'env': {k: os.environ.get(k) for k in ('JAX_PLATFORMS',"
        " 'XLA_PYTHON_CLIENT_PREALLOCATE')}}))\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAX_PLATFORMS", "XLA_PYTHON_CLIENT_PREALLOCATE")
    }
    env.update(environ)
    try:
        proc = subprocess.run(
            [*SNAKEMAKE, "-s", "probe_device.smk", "-n", "--configfile", str(path)],
            cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        probe.unlink()
    assert proc.returncode == 0, proc.stderr[-3000:]
    probed = json.loads(proc.stdout.split("PROBE ", 1)[1].splitlines()[0])
    return {**probed, "output": proc.stdout + proc.stderr}


def test_device_sets_the_jobs_platform_and_gpus(workdir, tmp_path):
    """`device: cpu` (default) runs every job on the CPU (JAX_PLATFORMS=cpu, no GPUs declared);
    `device: gpu` leaves JAX to pick the GPU and declares one GPU per training, evaluation and
    mechanism job, a stage's `resources.gpu` overriding it; GPU memory is allocated as needed
    with either (shared.smk, both studies); a JAX_PLATFORMS the user set wins."""
    cpu = _probe_device(workdir, tmp_path, "cpu", {}, {})
    assert set(cpu["gpu"].values()) == {0} and "launch-bound" not in cpu["output"]
    assert cpu["env"] == {"JAX_PLATFORMS": "cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    gpu = _probe_device(workdir, tmp_path, "gpu", {"mechanism": {"gpu": 2}}, {})
    assert {k for k, v in gpu["gpu"].items() if v} == {"train", "evaluate", "mechanism"}
    assert gpu["gpu"]["train"] == gpu["gpu"]["evaluate"] == 1 and gpu["gpu"]["mechanism"] == 2
    assert gpu["env"] == {"JAX_PLATFORMS": None, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    own = _probe_device(
        workdir, tmp_path, "cpu", {},
        {"JAX_PLATFORMS": "cpu,cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
    )  # fmt: skip
    assert own["env"] == {"JAX_PLATFORMS": "cpu,cuda", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}


def test_a_gpu_device_warns_with_the_measurement_before_any_job(workdir, tmp_path):
    """`device: gpu` costs more than the CPU in this study: the config check says so, with the
    measurement and how to silence it, before the DAG's first job (here, a dry run's);
    `device_warning: false` silences it (the CPU default prints nothing:
    test_device_sets_the_jobs_platform_and_gpus)."""
    from pnc.studies.mujoco.config_check import GPU_MEASUREMENT

    def dry_run(**change) -> str:
        config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
        config.update(change)
        path = tmp_path / "device.yaml"
        path.write_text(yaml.safe_dump(config))
        proc = _snakemake(workdir, "-n", "--configfile", str(path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    gpu = dry_run(device="gpu")
    first_job = re.search(r"^Shell command: ", gpu, flags=re.M)
    assert first_job and -1 < gpu.find(GPU_MEASUREMENT) < first_job.start()
    assert "2.26 times" in GPU_MEASUREMENT and "device_warning: false" in GPU_MEASUREMENT
    assert "launch-bound" not in dry_run(device="gpu", device_warning=False)


def test_the_mechanism_job_gets_every_mechanism_setting_of_the_config(workdir, tmp_path):
    """Every key of the schema's ``mechanism`` section that configures the stage's measurement
    (all but ``enabled`` and ``seeds``, which choose the jobs) reaches the job's ``--settings``
    with the config's value: none is dropped on the way."""
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    keys = set(schema["properties"]["mechanism"]["properties"]) - {"enabled", "seeds"}
    assert {"bootstrap_points", "bootstrap_members", "probes"} <= keys
    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    values = {"points_per_split": 37, "probes": 3, "probe_eps": 0.02, "bootstrap_points": 11,
              "bootstrap_members": 5}  # fmt: skip
    assert set(values) == keys, "a new mechanism key: give it a value here"
    config["mechanism"] = values
    path = tmp_path / "mechanism.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "-p", "--configfile", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.search(r"mechanism_diagnostics .*--settings '(\{[^']*\})'", proc.stdout)
    assert found, proc.stdout[-3000:]
    assert json.loads(found.group(1)) == values


def test_behaviour_policies_are_trained_only_where_none_are_stored(workdir, tmp_path):
    """Offline source: stored policies are rolled out as they are (every environment has them);
    ``retrain_policies`` trains each environment's own instead, and its data job reads them."""
    from pnc.studies.mujoco.data.policy_store import POLICY_DIR

    config = yaml.safe_load((workdir / ".test" / "config.yaml").read_text())
    config["envs"] = ["InvertedPendulum", "Humanoid"]
    assert all((POLICY_DIR / env / "policies.json").exists() for env in config["envs"])
    path = tmp_path / "offline.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "behaviour_policies" not in _job_counts(proc.stdout)
    assert "--policies resources/policies" not in proc.stdout
    config["data"]["retrain_policies"] = True
    path.write_text(yaml.safe_dump(config))
    proc = _snakemake(workdir, "-n", "--configfile", str(path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _job_counts(proc.stdout).get("behaviour_policies") == 2
    for env in config["envs"]:
        assert (
            f"pnc.workflow behaviour_policies --threads 1 {env} --out resources/policies"
            in proc.stdout
        )
        assert re.search(
            rf"offline_data --threads 1 {env} .*--policies resources/policies", proc.stdout
        )


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out" / "table.csv"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("partial")
        raise RuntimeError("job failed")
    assert not target.exists() and list(target.parent.iterdir()) == []
    with atomic_path(target) as tmp:
        tmp.write_text("complete")
    assert target.read_text() == "complete" and len(list(target.parent.iterdir())) == 1
