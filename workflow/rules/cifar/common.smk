# Config -> targets and parameters of the CIFAR-10 study. The config is checked against
# workflow/schemas/cifar.schema.yaml (one line per violation: key path and what is wrong), then
# validated by Snakemake, which fills in the defaults (both in ../shared.smk, which the MuJoCo
# study's common.smk includes too); checks across keys follow (OOD names, P&C blocks against the
# network, SWAG start epochs against the training epochs, the Deep Ensemble and calibration sizes
# against the training split). Every error names the key. Each method's sweep is then expanded,
# once (pnc.studies.cifar.sweep.expand_sweep), and written keyed by configuration id to
# results/cifar/sweeps/<method>.json: every post-hoc job reads its method's configurations there.

import json
import os
import re


include: "../shared.smk"


check_config(config, "cifar.schema.yaml")
allocator(config)

DATA = config["data"]
ID = DATA.get("id", "cifar10")
SEEDS = [int(s) for s in config["seeds"]]


def _methods():
    from pnc.studies.cifar.sweep import evaluated_methods

    return evaluated_methods(config)


# the methods that run: `evaluate`, or every configured method in the tables' order
METHODS = _methods()
MODEL = config.get("model") or {}
TRAIN = config.get("train") or {}
THREADS = {
    "data": 1, "train": 1, "posthoc": 1, "select": 1, "tables": 1, **(config.get("threads") or {})
}  # fmt: skip
PREPARED = "resources/cifar/data"


# Stage -> {mem_mb, runtime, gpu}: config `resources`; a key left out keeps the schema's default.
RES = job_resources(config, "cifar.schema.yaml")


def _check_across_keys():
    from pnc.studies.cifar.data import ID_DATASETS, tiny_train_images
    from pnc.studies.cifar.jobs import resnet_config
    from pnc.methods import ood as registry
    from pnc.methods.ood.posthoc import SectionContext
    from pnc.core.classifier.recipe import Recipe

    missing = [m for m in METHODS if m not in config["methods"]]
    if missing:
        raise WorkflowError(
            f"invalid config: evaluate {missing}: not configured under methods"
            f" (configured: {', '.join(config['methods'])})"
        )
    known = ID_DATASETS[ID].ood
    unknown = [n for n in DATA["ood"] if n not in known]
    if unknown:
        raise WorkflowError(
            f"invalid config: data.ood {unknown}: not an OpenOOD v1.5 OOD set of {ID}"
            f" (known: {', '.join(known)})"
        )
    net = resnet_config(MODEL)
    try:
        epochs = Recipe(**TRAIN).epochs
    except ValueError as err:
        raise WorkflowError(f"invalid config: train: {err}") from None
    sections = {}  # method -> its config, the defaults filled in (pnc.methods.ood)
    for method in METHODS:
        try:
            sections[method] = registry.method_config(method, config["methods"][method])
        except ValueError as err:
            raise WorkflowError(f"invalid config: {err}") from None
    n_train = None
    if DATA.get("tiny"):
        n_train = tiny_train_images(DATA["tiny"]) - int(DATA["val_size"])
    study = SectionContext(net, epochs, n_train)
    problems = [p for m, c in sections.items() for p in registry.get(m).study_problems(c, study)]
    if problems:
        raise WorkflowError(f"invalid config: {problems[0]}")
    if n_train is not None and n_train < 1:
        raise WorkflowError(f"invalid config: data.val_size leaves {n_train} training images")


_check_across_keys()

ENTRIES = {m: dict(config["methods"][m] or {}) for m in METHODS}


def sweep_path(method):
    return f"results/cifar/sweeps/{method}.json"


def _write_sweeps():
    """Each method's configurations, expanded here once and written keyed by id (a file that
    holds them already is kept as it is, so no job reruns)."""
    from pnc.studies.cifar.sweep import expand_sweep

    sweeps = {m: expand_sweep(m, ENTRIES[m]) for m in METHODS}
    for method, sweep in sweeps.items():
        sweep.write(sweep_path(method))
    return sweeps


SWEEPS = _write_sweeps()


def _runs():
    from pnc.methods.ood import runs_of

    return list(dict.fromkeys(r for m in METHODS for r in runs_of(m, ENTRIES[m])))


RUNS = _runs()


def _selecting():
    from pnc.methods.ood import get

    return [m for m in METHODS if get(m).selects]


# the methods that select among configurations: a sweep per seed and a selection stage each
SELECTING = _selecting()
SELECTING_PATTERN = "|".join(SELECTING) or "(?!)"  # the validate and select rules' methods
SWAG_STARTS = [int(s) for s in (ENTRIES.get("swag", {}).get("grid", {}).get("start_epoch") or [])]


wildcard_constraints:
    seed="|".join(str(s) for s in SEEDS),
    run="|".join(re.escape(r) for r in RUNS),
    method="|".join(METHODS),


# ----------------------------------------------------------------------------- paths and targets


def data_input(wildcards):
    """The generated benchmark's summary, or the fetch job's (data.fetch), or nothing."""
    if DATA.get("tiny"):
        return [os.path.join(DATA["root"], "tiny.json")]
    return ["resources/cifar/fetch.json"] if DATA.get("fetch", True) else []


def runs_for(wildcards):
    from pnc.methods.ood import runs_of

    return [
        f"results/cifar/runs/seed{wildcards.seed}/{run}/run.msgpack"
        for run in runs_of(wildcards.method, ENTRIES[wildcards.method])
    ]


def training_targets():
    return expand("results/cifar/runs/seed{seed}/{run}/run.json", seed=SEEDS, run=RUNS)


def validation_path(seed, method):
    return f"results/cifar/validation/seed{seed}/{method}.json"


def selection_path(method):
    return f"results/cifar/selection/{method}.json"


def selection_of(wildcards):
    """The method's selection (none for a method that selects nothing)."""
    return [selection_path(wildcards.method)] if wildcards.method in SELECTING else []


def score_targets():
    return expand("results/cifar/scores/seed{seed}/{method}/scores.npz", seed=SEEDS, method=METHODS)


TABLE_FILES = (
    "table2.csv", "table2.md", "table2.tex", "metrics.csv", "calibration.csv", "calibration.md",
    "aupr.csv", "aupr.md", "sweep.csv", "sweep.md",
)  # fmt: skip


def table_targets():
    return [f"results/cifar/tables/{name}" for name in TABLE_FILES]


def json_text(obj):
    return json.dumps(obj or {}, sort_keys=True)
