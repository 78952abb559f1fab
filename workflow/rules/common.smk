# Config -> targets and paths. Every target list, path helper and parameter string of the rules is
# defined here, derived from `config` (validated against workflow/schemas/config.schema.yaml);
# method grids are expanded with pnc.study.grid, so an unknown hyperparameter fails while the DAG is
# built, before any job runs. Config errors found here are WorkflowErrors naming the key.

import json
import os
import re

from pnc.mlp import MLPConfig
from pnc.study import grid as pnc_grid


def _config_entry(key, kind):
    value = config.get(key)
    if not isinstance(value, kind) or not value:
        raise WorkflowError(
            f"invalid config: {key!r} must be a non-empty {kind.__name__}, got {value!r}"
        )
    return value


def _check_methods():
    try:
        points = pnc_grid.expand_all(_config_entry("methods", dict))
    except (KeyError, ValueError) as err:
        raise WorkflowError(f"invalid config: {err}") from None
    return points


GRID_POINTS = _check_methods()


def _check_perturbed_layers(points, hidden):
    """P&C's `layers` against model.hidden, and `calibration_size` against data.max_train."""
    max_train = (config.get("data") or {}).get("max_train")
    for method, method_points in points.items():
        for point in method_points:
            cfg = point.config
            if hasattr(cfg, "perturbed_layers"):
                try:
                    cfg.perturbed_layers(len(hidden))
                except ValueError as err:
                    raise WorkflowError(
                        f"invalid config: methods.{method}.layers: {err} (model.hidden = {hidden})"
                    ) from None
            size = getattr(cfg, "calibration_size", None)
            if size is not None and max_train is not None and size > max_train:
                raise WorkflowError(
                    f"invalid config: methods.{method}.calibration_size = {size} is larger than"
                    f" data.max_train = {max_train} (the calibration set is drawn from the train split)"
                )


_check_perturbed_layers(
    GRID_POINTS, list((config.get("model") or {}).get("hidden", MLPConfig(out_dim=1).hidden))
)
ENVS = [str(e) for e in _config_entry("envs", list)]
SEEDS = [int(s) for s in _config_entry("seeds", list)]
METHODS = list(GRID_POINTS)
# distinct training runs (run_id -> spec) and evaluation jobs (method, run_id)
TRAINING_RUNS = {p.run_id: p.spec for pts in GRID_POINTS.values() for p in pts}
METHOD_RUNS = list(dict.fromkeys((m, p.run_id) for m, pts in GRID_POINTS.items() for p in pts))
DATA = config.get("data") or {}
if DATA.get("source") not in ("offline", "minari"):
    raise WorkflowError(
        f"invalid config: data.source must be 'offline' or 'minari', got {DATA.get('source')!r}"
    )
THREADS = {"train": 1, "evaluate": 1, "data": 1, **config.get("threads", {})}
MINARI_ROOT = DATA.get("minari_root", "resources/minari")


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
        f"resources/data/{wildcards.env}/far.json",
    ]


def metric_tables(env):
    """The evaluation outputs an environment's selection reads: every (seed, method, run)."""
    return [
        f"results/metrics/{env}/seed{seed}/{method}/{run}.csv"
        for seed in SEEDS
        for method, run in METHOD_RUNS
    ]


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
    opts = [f"--val-fraction {DATA.get('val_fraction', 0.1)}"]
    opts.append(f"--id-fraction {DATA.get('id_fraction', 0.1)}")
    for key in ("max_train", "max_val", "max_eval"):
        if DATA.get(key) is not None:
            opts.append(f"--{key.replace('_', '-')} {int(DATA[key])}")
    return " ".join(opts)


def calibration_options():
    """The variance-calibration variants every configuration is evaluated in (``--calibrations``)."""
    return " ".join(config.get("variance_calibration", ["raw", "vcal"]))
