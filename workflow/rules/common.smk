# Config -> targets and paths. Every target list, path helper and parameter string of the rules is
# defined here, derived from `config`. The config is first checked against
# workflow/schemas/config.schema.yaml (one line per violation: key path, offending value, what is
# allowed), then validated again by Snakemake, which fills in the schema's defaults (both in
# shared.smk, which the CIFAR study's common.smk includes too). Checks across
# keys follow (pool sizes, log-variance bounds, P&C layers and ranks against the network, the SWAG
# and Subspace snapshots); method grids are expanded with pnc.studies.mujoco.grid, so an unknown
# hyperparameter fails while the DAG is built, before any job runs. Every config error found here is
# a WorkflowError naming the key and its value.
#
# The grids are expanded here and only here: each method's configurations, typed and keyed by their
# id, are written to its grid table results/grid/{method}.json (pnc.studies.mujoco.grid.write_table), and
# every job reads the configurations it handles from that table by id. A table is rewritten only
# when its content changes, so Snakemake's modification-time check reruns exactly the jobs of a
# method whose configurations changed. (snakemake.utils.Paramspace would put every hyperparameter
# into the file paths and make one job per configuration; a job here evaluates every configuration
# of a method on one training run, building some together, so a keyed table fits better.)

import json
import os
import re
import shlex

from pnc.studies.mujoco import grid as pnc_grid
from pnc.studies.mujoco.config_check import cross_key_problems, ordered_like, run_methods
from pnc.studies.mujoco.per_sigma import PER_SIGMA_METHODS


include: "shared.smk"


def _defaults_order():
    """Every mapping of `config` in config.yaml's key order (pnc.studies.mujoco.config_check.ordered_like):
    Snakemake merges config.yaml into a --configfile overlay, which puts the overlay's keys first.
    """
    import yaml

    with open(os.path.join(workflow.basedir, "config.yaml")) as f:
        ordered = ordered_like(config, yaml.safe_load(f))
    config.clear()
    config.update(ordered)


_defaults_order()
check_config(config, "config.schema.yaml")
allocator(config)


# The schema has filled in every default by now (validate above), and it requires non-empty
# `envs`, `seeds` and `methods` and a known `data.source`: the checks below read values directly.


def _run_methods():
    """Config `run_methods` (pnc.studies.mujoco.config_check.run_methods): `config["methods"]` keeps the
    entries of the methods that run, in that order."""
    try:
        config["methods"] = run_methods(config)
    except ValueError as err:
        raise WorkflowError(f"invalid config: {err}") from None
    return list(config["methods"])


def _check_methods():
    try:
        return pnc_grid.expand_all(config["methods"])
    except (KeyError, ValueError) as err:
        raise WorkflowError(f"invalid config: {err}") from None


RUN_METHODS = _run_methods()
GRID_POINTS = _check_methods()
ENVS = [str(e) for e in config["envs"]]
SEEDS = [int(s) for s in config["seeds"]]
DATA = config["data"]


def _check_across_keys(points):
    """Every cross-key problem (pnc.studies.mujoco.config_check.cross_key_problems) in one error."""
    found = cross_key_problems(config, points)
    for line in found.warnings:
        logger.warning(f"config: {line}")
    if found.errors:
        raise WorkflowError(
            "invalid config: " + "\n  ".join(found.errors)
            if len(found.errors) == 1
            else f"invalid config ({len(found.errors)} problems):\n  " + "\n  ".join(found.errors)
        )


_check_across_keys(GRID_POINTS)
# each method's grid table, once the config has passed every check: its configurations, typed and
# keyed by id, in grid order
GRID_TABLE = "results/grid/{method}.json"
for _method, _points in GRID_POINTS.items():
    pnc_grid.write_table(GRID_TABLE.format(method=_method), _points)
METHODS = list(GRID_POINTS)
# distinct training runs (run_id -> spec) and evaluation jobs (method, run_id)
TRAINING_RUNS = {p.run_id: p.spec for pts in GRID_POINTS.values() for p in pts}
METHOD_RUNS = list(dict.fromkeys((m, p.run_id) for m, pts in GRID_POINTS.items() for p in pts))
THREADS = {"train": 1, "evaluate": 1, "data": 1, **config.get("threads", {})}
# config `evaluation` (pnc.studies.mujoco.phases): `two_phase` scores every configuration on the validation
# split (and the frontier sample), then, after each environment's selection, the configurations
# that the tables and figures read on the test splits; `full` scores every one on every split.
TWO_PHASE = config["evaluation"] == "two_phase"
# config `batch`: `env` runs an environment's training runs, validation-phase evaluations and test
# phases as three jobs (one process each, `python -m pnc.workflow batch`); `none` gives each its own.
BATCH = config["batch"] == "env"


# Scheduling order: longest jobs first. With as many jobs as cores, a long evaluation started last
# runs alone at the end while the other cores idle (a Humanoid seed's P&C evaluation did so for
# 15 of the piece's 56 minutes). A job's priority is the rough size of its work that
# pnc.studies.mujoco.grid.evaluation_work / training_work read from the config. Priorities only order the
# ready jobs: no output, command or parameter depends on them.
EVALUATION_WORK = pnc_grid.evaluation_work(GRID_POINTS)
TRAINING_WORK = pnc_grid.training_work(GRID_POINTS)


def evaluation_priority(wildcards):
    return EVALUATION_WORK.get((wildcards.method, wildcards.run), 0)


# A test phase's: the sum over the methods of each one's largest evaluation (it scores a few of
# each method's configurations).
TEST_PRIORITY = sum(
    max(w for (m, _), w in EVALUATION_WORK.items() if m == method)
    for method in {m for m, _ in EVALUATION_WORK}
)


def training_priority(wildcards):
    return TRAINING_WORK.get(wildcards.run, 0)


# The jobs that everything else waits for (data, splits) and the mechanism chain (selection,
# members, diagnostics: a long job that can start only when its environment's seeds are all
# evaluated) go before any training or evaluation as soon as they are ready. With the data jobs
# last, the quick default started one environment's seed 0 only after the other seeds' evaluations
# and then ran its mechanism stage alone at the end.
UPSTREAM_PRIORITY = 1 + max([0, TEST_PRIORITY, *EVALUATION_WORK.values(), *TRAINING_WORK.values()])
# The Minari downloads go before every other job: a dataset the remote lacks (or an unreachable
# remote) stops the run before the jobs that would read the data start.
DOWNLOAD_PRIORITY = UPSTREAM_PRIORITY + 1


MINARI_ROOT = DATA.get("minari_root", "resources/minari")


def _compile_cache():
    """The jobs' shared JAX compilation cache (pnc.runtime.compile_cache): config `compile_cache` (a
    directory, or false), unless PNC_COMPILE_CACHE is already set; jobs inherit the variable."""
    from pnc.runtime import compile_cache

    setting = config.get("compile_cache", compile_cache.DEFAULT_DIR)
    if isinstance(setting, str) and setting.strip().lower() in compile_cache.OFF_VALUES:
        setting = False  # `--config compile_cache=off` passes a string
    if setting is True or str(setting).strip().lower() == "true":
        raise WorkflowError(
            "invalid config: compile_cache = true: give a directory"
            f" (e.g. {compile_cache.DEFAULT_DIR}) or false"
        )
    if compile_cache.ENV_VAR not in os.environ:
        os.environ[compile_cache.ENV_VAR] = os.path.abspath(setting) if setting else "off"
    return os.environ[compile_cache.ENV_VAR]


COMPILE_CACHE = _compile_cache()


# passed on to jobs that run elsewhere (cluster executors), not only inherited by local ones
envvars:
    "PNC_COMPILE_CACHE",


# Stage -> {mem_mb, runtime}: config `resources`; a key left out keeps the schema's default.
RESOURCES = job_resources(config, "config.schema.yaml")

# config `device`: the platform JAX computes on in every job (jobs inherit the variables), and the
# GPUs the JAX-heavy stages declare.
DEVICE = config.get("device", "cpu")
GPU_STAGES = ("train", "evaluate", "mechanism")
# (GPU memory as needed, XLA_PYTHON_CLIENT_PREALLOCATE=false, is set for every job in shared.smk.)
if DEVICE != "gpu":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
for _stage, _spec in RESOURCES.items():
    _spec.setdefault("gpu", int(DEVICE == "gpu" and _stage in GPU_STAGES))


def _alternatives(values):
    return "|".join(re.escape(str(v)) for v in values)


wildcard_constraints:
    env=_alternatives(ENVS),
    seed=_alternatives(SEEDS),
    run=_alternatives(TRAINING_RUNS),
    method=_alternatives(METHODS),


# ----------------------------------------------------------------------------- paths


def policy_dir(env):
    """Behaviour policies trained by the workflow, or None to use the stored copies in pnc/studies/mujoco/data."""
    from pnc.studies.mujoco.data.policy_store import POLICY_DIR

    stored = (POLICY_DIR / env / "policies.json").exists()
    if stored and not DATA.get("retrain_policies", False):
        return None
    return f"resources/policies/{env}"


def policy_input(wildcards):
    path = policy_dir(wildcards.env)
    return [] if path is None else [path]


def policy_option(wildcards):
    path = policy_dir(wildcards.env)
    return "" if path is None else "--policies resources/policies"


# An (env, seed)'s data splits and one of its training runs (directories).
SPLITS_DIR = "resources/splits/{env}/seed{seed}"
RUN_DIR = "results/runs/{env}/seed{seed}/{run}"


def splits_dir(wildcards):
    return SPLITS_DIR.format(env=wildcards.env, seed=wildcards.seed)


def far_input(wildcards):
    """With Minari data, an environment's Far data wait for its Minari datasets (downloaded or
    found), so that a missing dataset stops the run before any job of the environment."""
    return [f"resources/data/{wildcards.env}/minari.json"] if DATA["source"] == "minari" else []


def source_records(wildcards):
    source = "offline" if DATA["source"] == "offline" else "minari"
    return [
        f"resources/data/{wildcards.env}/{source}.json",
        f"resources/data/{wildcards.env}/far-seed{wildcards.seed}.json",
    ]


# The `evaluate` job of an (env, seed, method, run) scores every configuration using the run: on
# every split (full: results/metrics/), or on the validation split and the frontier sample
# (two_phase: results/validation/, with the posteriors the test phase restores beside the table).
EVALUATION_TABLE = (
    "results/validation/{env}/seed{seed}/{method}/{run}.csv"
    if TWO_PHASE
    else "results/metrics/{env}/seed{seed}/{method}/{run}.csv"
)
STORED_POSTERIORS = (
    {"posteriors": "results/validation/{env}/seed{seed}/{method}/{run}.npz"} if TWO_PHASE else {}
)
# the two-phase test phase's table of an (env, seed, method), and an environment's test plan
TEST_TABLE = "results/test/{env}/seed{seed}/{method}.csv"
TEST_PLAN = "results/envs/{env}/test_plan.json"


def metric_tables(env):
    """The evaluation outputs an environment's selection reads: every (seed, method, run)."""
    return [
        EVALUATION_TABLE.format(env=env, seed=seed, method=method, run=run)
        for seed in SEEDS
        for method, run in METHOD_RUNS
    ]


def test_tables(env):
    """The two-phase test phase's tables of an environment: every (seed, method)."""
    return [TEST_TABLE.format(env=env, seed=s, method=m) for s in SEEDS for m in METHODS]


def test_phase_reads(env, seed):
    """What the test phase of an (env, seed) reads: every training run of every method and the
    validation phase's tables and stored posteriors of each (the plan names the configurations,
    so the runs it needs are known only after the selection)."""
    where = dict(env=env, seed=seed)
    paths = (
        path
        for method, run in METHOD_RUNS
        for path in (
            f"results/runs/{env}/seed{seed}/{run}/run.msgpack",
            f"results/runs/{env}/seed{seed}/{run}/run.json",
            EVALUATION_TABLE.format(run=run, method=method, **where),
            STORED_POSTERIORS["posteriors"].format(run=run, method=method, **where),
        )
    )
    return list(dict.fromkeys(paths))


def test_phase_inputs(wildcards):
    """test_phase_reads of the job's (env, seed)."""
    return test_phase_reads(wildcards.env, wildcards.seed)


def piece_tables(env, seed):
    """The metric tables of one (env, seed): the piece `scripts/reference_runs.sh` stores (two
    phases: the validation phase's tables and stored posteriors, and the test phase's tables,
    which need the selection over every seed of the environment)."""
    where = [dict(env=env, seed=seed, method=m, run=r) for m, r in METHOD_RUNS]
    tables = [EVALUATION_TABLE.format(**w) for w in where]
    if TWO_PHASE:
        tables += [STORED_POSTERIORS["posteriors"].format(**w) for w in where]
        tables += [TEST_TABLE.format(env=env, seed=seed, method=m) for m in METHODS]
    return tables


def env_outputs(name):
    return [f"results/envs/{env}/{name}" for env in ENVS]


# ----------------------------------------------------------------------------- targets

REPORT_TABLES = ("cross_env", "wilcoxon", "hparams", "per_env", "spearman")
REPORT_TABLE_FORMATS = ("tex", "md", "csv")
REPORT_FIGURE_FORMATS = ("pdf", "png")


def data_targets():
    """The episode splits of every (env, seed)."""
    return expand("resources/splits/{env}/seed{seed}/manifest.json", env=ENVS, seed=SEEDS)


def training_targets():
    """Every training run of every (env, seed)."""
    return expand(
        "results/runs/{env}/seed{seed}/{run}/run.json",
        env=ENVS,
        seed=SEEDS,
        run=list(TRAINING_RUNS),
    )


def results_targets():
    return ["results/all_configs.csv", "results/results.csv", "results/selection.json"]


def report_targets():
    """Every file the report rules write: the tables, stats.json and the figures."""
    return (
        expand("results/tables/{table}.{ext}", table=REPORT_TABLES, ext=REPORT_TABLE_FORMATS)
        + ["results/tables/stats.json"]
        + expand("figures/frontier_all.{ext}", ext=REPORT_FIGURE_FORMATS)
        + expand(
            "figures/{kind}/{env}.{ext}",
            kind=("frontier", "metrics"),
            env=ENVS,
            ext=REPORT_FIGURE_FORMATS,
        )
    )


# ----------------------------------------------------------------------------- params


def spec_json(run_id):
    spec = TRAINING_RUNS[run_id]
    return json.dumps({"kind": spec.kind, "options": [list(o) for o in spec.options]})


def grid_tables(methods=None):
    """The grid tables of `methods` that run (default: every method that runs)."""
    return [GRID_TABLE.format(method=m) for m in (methods or METHODS) if m in GRID_POINTS]


def run_configs(method, run):
    """The ids of the configurations an evaluation job handles: its method's on its run, in grid
    order (the job reads them from the grid table by id)."""
    return [p.config_id for p in GRID_POINTS[method] if p.run_id == run]


# The stages' command lines, shell-quoted (the words after the module in a job's
# `python -m pnc.workflow ...`): one per job, or several
# joined by `batch_command` into one job of config `batch: env`.


def stage_command(stage, threads, *args):
    """`STAGE --threads N ARGS...`, each word shell-quoted."""
    return shlex.join([stage, "--threads", str(threads), *map(str, args)])


def batch_command(commands):
    """The `batch` stage running `commands` (stage_command's) one after another in one process."""
    from pnc.workflow.commands import BATCH_SEPARATOR

    return f"batch {f' {BATCH_SEPARATOR} '.join(commands)}"


def train_command(env, seed, run, threads):
    """The training run `run` of (env, seed)."""
    return stage_command(
        "train_run", threads,
        "--env", env, "--seed", seed, "--run-id", run, "--spec", spec_json(run),
        "--splits", SPLITS_DIR.format(env=env, seed=seed),
        "--out", RUN_DIR.format(env=env, seed=seed, run=run),
        "--model", section_json("model"), "--train", section_json("train"),
    )  # fmt: skip


def evaluate_command(env, seed, method, run, threads):
    """Every configuration of `method` on the training run `run` of (env, seed): on every split
    (full), or on the validation split and the frontier sample, storing the posteriors the test
    phase restores (two_phase)."""
    from pnc.studies.mujoco.phases import VALIDATION_SPLITS

    where = dict(env=env, seed=seed, method=method, run=run)
    phase = (
        [
            "--score",
            *VALIDATION_SPLITS,
            "--posteriors",
            STORED_POSTERIORS["posteriors"].format(**where),
        ]
        if TWO_PHASE
        else []
    )
    return stage_command(
        "evaluate_run", threads,
        "--env", env, "--seed", seed, "--method", method, "--run-id", run,
        "--run", RUN_DIR.format(**where),
        "--splits", SPLITS_DIR.format(env=env, seed=seed),
        "--grid", GRID_TABLE.format(method=method), "--configs", *run_configs(method, run),
        "--calibrations", *CALIBRATIONS, *phase,
        "--out", EVALUATION_TABLE.format(**where),
    )  # fmt: skip


def test_command(env, seed, threads):
    """The two-phase test phase of (env, seed): every method's planned configurations."""
    return stage_command(
        "evaluate_test", threads,
        "--env", env, "--seed", seed, "--methods", *METHODS,
        "--runs", f"results/runs/{env}/seed{seed}",
        "--splits", SPLITS_DIR.format(env=env, seed=seed),
        "--grids", *grid_tables(), "--calibrations", *CALIBRATIONS,
        "--validation", f"results/validation/{env}/seed{seed}",
        "--plan", TEST_PLAN.format(env=env),
        "--out", *[TEST_TABLE.format(env=env, seed=seed, method=m) for m in METHODS],
    )  # fmt: skip


def report_tables_command(threads):
    """The report's tables and stats.json from results.csv."""
    return stage_command("report_tables", threads, "results/results.csv", "--out", "results/tables")


def figure_command(kind, env, threads):
    """The report's `kind` figure (frontier or metrics) of `env`; of every environment when `env`
    is None (the frontier overview)."""
    source = "results/all_configs.csv" if kind == "frontier" else "results/results.csv"
    where = ["--env", env] if env is not None else []
    stem = f"figures/{kind}/{env}" if env is not None else "figures/frontier_all"
    return stage_command("report_figure", threads, kind, source, *where, "--out", stem)


def mechanism_figures_command(env, threads):
    """The mechanism figures (Figures 1 B/C and 3) of `env`."""
    return stage_command(
        "mechanism_report", threads,
        "figures", *mechanism_files(env),
        "--all-configs", f"results/envs/{env}/all_configs.csv", "--env", env,
        "--grid", *grid_tables(PER_SIGMA_METHODS), "--out", f"figures/mechanism/{env}",
    )  # fmt: skip


def mechanism_table_command(threads):
    """The mechanism table of every environment."""
    return stage_command(
        "mechanism_report", threads,
        "table", *[f for env in ENVS for f in mechanism_files(env)],
        "--all-configs", "results/all_configs.csv",
        "--grid", *grid_tables(PER_SIGMA_METHODS), "--out", "results/tables",
    )  # fmt: skip


def section_json(name):
    return json.dumps(config.get(name) or {}, sort_keys=True)


def split_options():
    opts = [
        f"--transitions-per-regime {int(DATA['transitions_per_regime'])}",
        f"--val-fraction {DATA['val_fraction']}",
        f"--target {DATA['target']}",
    ]
    if DATA.get("id_transitions") is not None:
        opts.append(f"--id-transitions {int(DATA['id_transitions'])}")
    return " ".join(opts)


#: The variance-calibration variants every configuration is evaluated in (``--calibrations``).
CALIBRATIONS = [str(c) for c in config.get("variance_calibration", ["raw", "vcal"])]


def calibration_options():
    """CALIBRATIONS as the words of a shell command."""
    return " ".join(CALIBRATIONS)


# ----------------------------------------------------------------------------- mechanism (Figures 1 B/C, 3)

MECHANISM = config.get("mechanism") or {}
MECHANISM_ON = bool(MECHANISM.get("enabled", True)) and "pnc" in config["methods"]
MECHANISM_SEEDS = [int(s) for s in (MECHANISM.get("seeds") or SEEDS[:1])]
MECHANISM_FIGURES = ("magnitudes", "frontier_sigma", "distance", "sketch")
MECHANISM_FIGURE_TITLES = {
    "magnitudes": "Figure 1 B/C: ||dh|| and ||dy||",
    "frontier_sigma": "Figure 3 A: correction at equal sigma",
    "distance": "Figure 3 B: disagreement vs distance",
    "sketch": "Figure 3 C: sketches vs disagreement",
}
_unknown = sorted(set(MECHANISM_SEEDS) - set(SEEDS))
if _unknown:
    raise WorkflowError(
        f"invalid config: mechanism.seeds = {MECHANISM_SEEDS}: {_unknown} not in seeds = {SEEDS}"
    )
PNC_RUN = GRID_POINTS["pnc"][0].run_id if MECHANISM_ON else None


def mechanism_runs(wildcards):
    """Every training run the mechanism stage reads for one (env, seed): the base run and the own
    runs of the mechanism methods (Subspace's trajectory), each as msgpack and json."""
    from pnc.studies.mujoco.mechanism_columns import MECHANISM_METHODS

    run_ids = dict.fromkeys(
        p.run_id for m in MECHANISM_METHODS if m in GRID_POINTS for p in GRID_POINTS[m]
    )
    return [
        f"results/runs/{wildcards.env}/seed{wildcards.seed}/{run_id}/run.{ext}"
        for run_id in run_ids
        for ext in ("msgpack", "json")
    ]


def mechanism_grid_tables():
    """The grid tables of the mechanism methods that run (their selected configurations)."""
    from pnc.studies.mujoco.mechanism_columns import MECHANISM_METHODS

    return grid_tables(MECHANISM_METHODS)


def mechanism_posteriors(wildcards):
    """The posteriors the two-phase validation phase stored for the mechanism methods that store
    them (Subspace's chains), which the mechanism stage restores instead of running the chains
    again; none in `full` (it stores none)."""
    from pnc.methods.regression import get as get_method
    from pnc.studies.mujoco.mechanism_columns import MECHANISM_METHODS

    if not TWO_PHASE:
        return []
    where = dict(env=wildcards.env, seed=wildcards.seed)
    return [
        STORED_POSTERIORS["posteriors"].format(method=method, run=run, **where)
        for method, run in METHOD_RUNS
        if method in MECHANISM_METHODS and get_method(method).stores_posteriors
    ]


def mechanism_validation_option(wildcards):
    """The mechanism command's `--validation` (the directory of the posteriors above), if any."""
    if not TWO_PHASE:
        return ""
    return f" --validation results/validation/{wildcards.env}/seed{wildcards.seed}"


def mechanism_files(env):
    return [f"results/mechanism/{env}/seed{seed}.parquet" for seed in MECHANISM_SEEDS]


def mechanism_targets():
    """The mechanism figures of every environment and the mechanism table (none when off)."""
    if not MECHANISM_ON:
        return []
    return expand(
        "figures/mechanism/{env}/{figure}.{ext}",
        env=ENVS,
        figure=MECHANISM_FIGURES,
        ext=REPORT_FIGURE_FORMATS,
    ) + expand("results/tables/mechanism.{ext}", ext=REPORT_TABLE_FORMATS)


def mechanism_out_dir(wildcards, output):
    return os.path.dirname(output[0])


# ----------------------------------------------------------------------------- report outputs

# Snakemake's `report(...)`, which marks an output for the HTML report (named so that its parser
# does not read a line starting with `report` as the `report:` directive).
in_report = report


def table_outputs():
    """The report tables in every format and stats.json (the CSVs in the HTML report)."""
    return [
        *[
            in_report(
                f"results/tables/{table}.csv",
                caption=f"../report/table_{table}.rst",
                category="Tables",
                labels={"table": table},
            )
            for table in REPORT_TABLES
        ],
        *expand("results/tables/{table}.{ext}", table=REPORT_TABLES, ext=("tex", "md")),
        "results/tables/stats.json",
    ]


FIGURE_TITLES = {"frontier": "ID/OOD frontier", "metrics": "headline metrics"}


def figure_outputs(kind, env):
    """The `kind` figure of `env` as [png (in the HTML report), pdf]; `env` None: the frontier of
    every environment; "{env}": the wildcard of a per-environment rule."""
    if env is None:
        return [
            in_report(
                "figures/frontier_all.png",
                caption="../report/frontier_all.rst",
                category="Figures",
                subcategory="All environments",
                labels={"figure": FIGURE_TITLES["frontier"]},
            ),
            "figures/frontier_all.pdf",
        ]
    return [
        in_report(
            f"figures/{kind}/{env}.png",
            caption=f"../report/{kind}.rst",
            category="Figures",
            subcategory=env,
            labels={"env": env, "figure": FIGURE_TITLES[kind]},
        ),
        f"figures/{kind}/{env}.pdf",
    ]


def mechanism_figure_outputs(env):
    """The mechanism figures of `env` ("{env}": a rule's wildcard): the PNGs (in the HTML report),
    then the PDFs."""
    return [
        *[
            in_report(
                f"figures/mechanism/{env}/{figure}.png",
                caption=f"../report/mechanism_{figure}.rst",
                category="Mechanism",
                subcategory=env,
                labels={"env": env, "figure": MECHANISM_FIGURE_TITLES[figure]},
            )
            for figure in MECHANISM_FIGURES
        ],
        *[f"figures/mechanism/{env}/{figure}.pdf" for figure in MECHANISM_FIGURES],
    ]


def mechanism_table_outputs():
    """The mechanism table: its CSV (in the HTML report), Markdown and LaTeX."""
    return [
        in_report(
            "results/tables/mechanism.csv",
            caption="../report/table_mechanism.rst",
            category="Tables",
            labels={"table": "mechanism"},
        ),
        "results/tables/mechanism.md",
        "results/tables/mechanism.tex",
    ]
