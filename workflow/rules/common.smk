# Config -> targets. Everything here is derived from `config` (validated against
# workflow/schemas/config.schema.yaml); method grids are expanded with pnc.study.grid, so an unknown
# hyperparameter fails while the DAG is built, before any job runs.

import json
import re

from pnc.study import grid as pnc_grid


def _check_methods():
    try:
        points = pnc_grid.expand_all(config["methods"])
    except (KeyError, ValueError) as err:
        raise WorkflowError(f"invalid config: {err}") from None
    return points


GRID_POINTS = _check_methods()
ENVS = list(config["envs"])
SEEDS = [int(s) for s in config["seeds"]]
METHODS = list(config["methods"])
# distinct training runs (run_id -> spec) and evaluation jobs (method, run_id)
TRAINING_RUNS = {p.run_id: p.spec for pts in GRID_POINTS.values() for p in pts}
METHOD_RUNS = list(dict.fromkeys((m, p.run_id) for m, pts in GRID_POINTS.items() for p in pts))
DATA = config["data"]
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
    from pnc.data.ars import POLICY_DIR

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


def results_targets():
    return ["results/all_configs.csv", "results/results.csv", "results/selection.json"]


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
