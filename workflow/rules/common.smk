# Config -> targets and paths. Every target list, path helper and parameter string of the rules is
# defined here, derived from `config`. The config is first checked against
# workflow/schemas/config.schema.yaml (one line per violation: key path, offending value, what is
# allowed), then validated again by Snakemake, which fills in the schema's defaults. Checks across
# keys follow (pool sizes, log-variance bounds, P&C layers and ranks against the network, the SWAG
# and Subspace snapshots); method grids are expanded with pnc.study.grid, so an unknown
# hyperparameter fails while the DAG is built, before any job runs. Every config error found here is
# a WorkflowError naming the key and its value.

import json
import os
import re

from snakemake.utils import validate

from pnc.study import grid as pnc_grid
from pnc.study.config_check import integer_seeds, schema_problems

SCHEMA = "workflow/schemas/config.schema.yaml"
# the schema next to this file, wherever the including Snakefile lives
SCHEMA_PATH = os.path.normpath(
    os.path.join(workflow.current_basedir, "..", "schemas", "config.schema.yaml")
)


# ----------------------------------------------------------------------------- schema


def load_schema(schema_path):
    import yaml

    with open(schema_path) as f:
        return yaml.safe_load(f)


def check_schema(data, schema):
    """Raise a WorkflowError listing every violation of ``schema``, one line each."""
    lines = schema_problems(data, schema)
    if lines:
        raise WorkflowError(
            f"invalid config ({len(lines)} problem(s); every key is documented in {SCHEMA}):\n"
            + "\n".join(f"  {line}" for line in lines)
        )


integer_seeds(config)  # `--config seeds=[0,1]` passes strings
check_schema(config, load_schema(SCHEMA_PATH))
validate(config, SCHEMA_PATH)  # passes now; fills in the defaults


# The schema has filled in every default by now (validate above), and it requires non-empty
# `envs`, `seeds` and `methods` and a known `data.source`: the checks below read values directly.


def _check_methods():
    try:
        return pnc_grid.expand_all(config["methods"])
    except (KeyError, ValueError) as err:
        raise WorkflowError(f"invalid config: {err}") from None


GRID_POINTS = _check_methods()
ENVS = [str(e) for e in config["envs"]]
SEEDS = [int(s) for s in config["seeds"]]
DATA = config["data"]


def _check_pnc(points, hidden, envs):
    """P&C's `layers` against model.hidden, its `rank` against the kernel size d_in x d_out of
    every perturbed layer (layer 0's d_in is the environment's observation + action, layer l's is
    model.hidden[l-1]), and `calibration_size` against the train rows of the ID pool."""
    from pnc.data import env_spec

    pool = _split_config()
    max_train = pool.transitions_per_regime - pool.n_val
    for method, method_points in points.items():
        for point in method_points:
            cfg = point.config
            if not hasattr(cfg, "perturbed_layers"):
                continue
            try:
                layers = cfg.perturbed_layers(len(hidden))
            except ValueError as err:
                raise WorkflowError(
                    f"invalid config: methods.{method}.layers: {err} (model.hidden = {hidden})"
                ) from None
            for layer in layers:
                for env in envs:
                    if layer == 0:
                        spec = env_spec(env)
                        d_in = spec.obs_dim + spec.act_dim
                        source = f"{env}: obs {spec.obs_dim} + action {spec.act_dim}"
                    else:
                        d_in, source = hidden[layer - 1], f"model.hidden[{layer - 1}]"
                    d_out = hidden[layer]
                    if cfg.rank > d_in * d_out:
                        raise WorkflowError(
                            f"invalid config: methods.{method}.rank = {cfg.rank} is larger than the"
                            f" kernel of perturbed hidden layer {layer}: d_in {d_in} ({source}) x"
                            f" d_out {d_out} (model.hidden[{layer}] = {d_out}) = {d_in * d_out}"
                        )
            size = cfg.calibration_size
            if size is not None and size > max_train:
                raise WorkflowError(
                    f"invalid config: methods.{method}.calibration_size = {size} is larger than"
                    f" the {max_train} train rows of the ID pool (data.transitions_per_regime ="
                    f" {pool.transitions_per_regime} minus data.val_fraction ="
                    f" {pool.val_fraction} of it); the calibration set is drawn from the train rows"
                )


def _split_config():
    from pnc.data import SplitConfig

    try:
        return SplitConfig(
            transitions_per_regime=int(DATA["transitions_per_regime"]),
            val_fraction=float(DATA["val_fraction"]),
            id_transitions=DATA.get("id_transitions"),
            target=DATA["target"],
        )
    except ValueError as err:
        raise WorkflowError(f"invalid config: data: {err}") from None


def _check_pools():
    """Far and offline datasets large enough for their pools (Minari sizes are checked by the
    split job, which names the dataset and its size)."""
    pool = _split_config()
    far = int(DATA["far_transitions"])
    if far < pool.transitions_per_regime:
        raise WorkflowError(
            f"invalid config: data.far_transitions = {far} is smaller than"
            f" data.transitions_per_regime = {pool.transitions_per_regime} (the Far pool)"
        )
    if DATA["source"] == "offline":
        need = pool.transitions_per_regime + pool.n_id
        have = int(DATA["offline_transitions"])
        if have < need:
            raise WorkflowError(
                f"invalid config: data.offline_transitions = {have} cannot hold the ID pool"
                f" (data.transitions_per_regime = {pool.transitions_per_regime}) and the"
                f" episode-disjoint ID evaluation rows (data.id_transitions = {pool.n_id}):"
                f" it needs more than {need} (one episode is cut at the pool's end)"
            )


def _check_logvar(model):
    low, high = model["min_logvar"], model["max_logvar"]
    if low >= high:
        raise WorkflowError(
            f"invalid config: model.min_logvar = {low} must be < model.max_logvar = {high}"
        )


def _check_snapshots(points, train):
    """SWAG's base-run snapshots (train.collection over train.steps) and Subspace's own run: each
    needs >= 2 collected iterates when it runs to its step cap; ranks above them are cut."""
    from pnc.train import Collection

    try:
        base = Collection(**train["collection"])
    except (TypeError, ValueError) as err:
        raise WorkflowError(f"invalid config: train.collection: {err}") from None
    steps = int(train["steps"])
    warned = set()
    for method, method_points in points.items():
        for point in method_points:
            if method == "swag":
                collection, run_steps, where = base, steps, "train.collection over train.steps"
            elif method == "subspace":
                cfg = point.config
                collection = Collection(cfg.collect_start, cfg.collect_every, cfg.n_snapshots)
                run_steps = cfg.trajectory_steps
                where = "methods.subspace collect_start/collect_every over trajectory_steps"
            else:
                continue
            n_snap = collection.n_snapshots(run_steps)
            if n_snap < 2:
                raise WorkflowError(
                    f"invalid config: {where} = {run_steps} steps collect {n_snap} iterate(s)"
                    f" (from step {collection.start_step}, every {collection.every}) for"
                    f" methods.{method}; it needs >= 2"
                )
            kept = min(collection.rank, n_snap)
            rank = getattr(point.config, "rank", None)
            if rank is not None and rank > kept and method not in warned:
                warned.add(method)
                logger.warning(
                    f"config: methods.{method}.rank = {rank} is above the {kept} deviation"
                    f" columns its run keeps; {kept} are used"
                )


def _check_across_keys(points):
    model = config["model"]
    _check_pools()
    _check_logvar(model)
    _check_pnc(points, list(model["hidden"]), ENVS)
    _check_snapshots(points, config["train"])


_check_across_keys(GRID_POINTS)
METHODS = list(GRID_POINTS)
# distinct training runs (run_id -> spec) and evaluation jobs (method, run_id)
TRAINING_RUNS = {p.run_id: p.spec for pts in GRID_POINTS.values() for p in pts}
METHOD_RUNS = list(dict.fromkeys((m, p.run_id) for m, pts in GRID_POINTS.items() for p in pts))
THREADS = {"train": 1, "evaluate": 1, "data": 1, **config.get("threads", {})}
MINARI_ROOT = DATA.get("minari_root", "resources/minari")


def _compile_cache():
    """The jobs' shared JAX compilation cache (pnc.compile_cache): config `compile_cache` (a
    directory, or false), unless PNC_COMPILE_CACHE is already set; jobs inherit the variable."""
    from pnc import compile_cache

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


def _job_resources():
    """Stage -> {mem_mb, runtime}: config `resources`; a key left out keeps the schema's default."""
    stages = load_schema(SCHEMA_PATH)["properties"]["resources"]["properties"]
    given = config.get("resources") or {}
    return {
        stage: {**spec["default"], **(given.get(stage) or {})} for stage, spec in stages.items()
    }


RESOURCES = _job_resources()


def _alternatives(values):
    return "|".join(re.escape(str(v)) for v in values)


wildcard_constraints:
    env=_alternatives(ENVS),
    seed=_alternatives(SEEDS),
    run=_alternatives(TRAINING_RUNS),
    method=_alternatives(METHODS),


# ----------------------------------------------------------------------------- paths


def policy_dir(env):
    """Behaviour policies trained by the workflow, or None to use the stored copies in pnc/data."""
    from pnc.data.behaviour import POLICY_DIR

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


def splits_dir(wildcards):
    return f"resources/splits/{wildcards.env}/seed{wildcards.seed}"


def run_dir(wildcards):
    return f"results/runs/{wildcards.env}/seed{wildcards.seed}/{wildcards.run}"


def source_records(wildcards):
    source = "offline" if DATA["source"] == "offline" else "minari"
    return [
        f"resources/data/{wildcards.env}/{source}.json",
        f"resources/data/{wildcards.env}/far-seed{wildcards.seed}.json",
    ]


def metric_tables(env):
    """The evaluation outputs an environment's selection reads: every (seed, method, run)."""
    return [
        f"results/metrics/{env}/seed{seed}/{method}/{run}.csv"
        for seed in SEEDS
        for method, run in METHOD_RUNS
    ]


def piece_tables(env, seed):
    """The metric tables of one (env, seed): the piece `scripts/reference_runs.sh` stores."""
    return [f"results/metrics/{env}/seed{seed}/{method}/{run}.csv" for method, run in METHOD_RUNS]


def env_outputs(name):
    return [f"results/envs/{env}/{name}" for env in ENVS]


def tables_dir(wildcards, output):
    """Directory of the report tables (next to stats.json)."""
    return os.path.dirname(output.json)


def figure_stem(wildcards, output):
    """A figure's path without its extension (the report writes STEM.pdf and STEM.png)."""
    return os.path.splitext(output.png)[0]


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


def method_json(method):
    return json.dumps(config["methods"][method] or {})  # grid order kept: it breaks ties


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


def calibration_options():
    """The variance-calibration variants every configuration is evaluated in (``--calibrations``)."""
    return " ".join(config.get("variance_calibration", ["raw", "vcal"]))


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
