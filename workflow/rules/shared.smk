# What both studies' config handling shares, included first by workflow/rules/common.smk (the
# MuJoCo study) and workflow/rules/cifar/common.smk (the CIFAR study): the config checked against
# its schema under workflow/schemas/ (one line per violation: key path, offending value, what is
# allowed; `seeds` given on the command line read as integers), then validated by Snakemake,
# which fills in the schema's defaults; each stage's job resources (the schema's `resources`
# defaults, overridden key by key by the config); and the jobs' GPU memory: allocated as needed,
# so that `--resources gpu=N` jobs can share one GPU.

import os

from snakemake.utils import validate

from pnc.runtime.config_schema import integer_seeds, schema_problems

SCHEMA_DIR = os.path.normpath(os.path.join(workflow.current_basedir, "..", "schemas"))


def schema_path(name):
    """The schema file `name` in workflow/schemas/, wherever the including Snakefile lives."""
    return os.path.join(SCHEMA_DIR, name)


def load_schema(path):
    import yaml

    with open(path) as f:
        return yaml.safe_load(f)


def check_schema(data, schema, documented_in):
    """Raise a WorkflowError listing every violation of ``schema``, one line each."""
    lines = schema_problems(data, schema)
    if lines:
        raise WorkflowError(
            f"invalid config ({len(lines)} problem(s); every key is documented in {documented_in}):\n"
            + "\n".join(f"  {line}" for line in lines)
        )


def check_config(data, name):
    """`data` checked against workflow/schemas/`name` (every problem in one error), then validated
    by Snakemake, which fills in the schema's defaults."""
    integer_seeds(data)  # `--config seeds=[0,1]` passes strings
    path = schema_path(name)
    check_schema(data, load_schema(path), f"workflow/schemas/{name}")
    validate(data, path)  # passes now; fills in the defaults


def job_resources(data, name):
    """Stage -> {mem_mb, runtime, ...}: `resources` of `data`; a key left out keeps the default of
    workflow/schemas/`name`."""
    stages = load_schema(schema_path(name))["properties"]["resources"]["properties"]
    given = data.get("resources") or {}
    return {
        stage: {**spec["default"], **(given.get(stage) or {})} for stage, spec in stages.items()
    }


def allocator(data):
    """Config `allocator` (filled in by the schema): the jobs inherit GLIBC_TUNABLES with the
    policy's tunables added to what the caller set (pnc.runtime.allocator.enable): the same results, less
    CPU time. Rules of the stages in pnc.runtime.allocator.SHORT_LIVED start their command with
    pnc.runtime.allocator.SHELL_PREFIX."""
    from pnc.runtime import allocator as policy

    policy.enable(data["allocator"])


# JAX's default on a GPU reserves 75 % of its memory in the first process that touches it, so a
# second job on the same GPU fails with CUDA out of memory. Every job of both studies inherits
# this from the Snakemake process; a value the user set is kept.
GPU_MEMORY_VARS = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def share_gpu_memory():
    """The jobs allocate GPU memory as they need it (GPU_MEMORY_VARS, unless set already)."""
    for name, value in GPU_MEMORY_VARS.items():
        os.environ.setdefault(name, value)


share_gpu_memory()


# passed on to jobs that run elsewhere (cluster executors), not only inherited by local ones
envvars:
    "XLA_PYTHON_CLIENT_PREALLOCATE",
