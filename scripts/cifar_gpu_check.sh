#!/usr/bin/env bash
# The CIFAR-10 study's GPU check: the whole DAG of config/cifar_gpu_check.yaml (full-width
# PreAct ResNet-18, generated benchmark, 3 epochs, every method, Table 2) on one GPU, its jobs
# sharing it (--resources gpu=$GPUS), run by the machine's own Python and JAX rather than the
# project's .venv: $PYTHON (default python3) must import jax with its CUDA plugin, flax, optax,
# pandas, msgpack, pyyaml and snakemake. Jobs allocate GPU memory as needed
# (XLA_PYTHON_CLIENT_PREALLOCATE=false, unless set). Prints the wall time at the end; per-job times
# are in benchmarks/cifar/. Extra arguments go to snakemake (e.g. -n).
#   bash scripts/cifar_gpu_check.sh                 # GPUS=8 CORES=16 PYTHON=python3
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="$(command -v "${PYTHON:-python3}")" || { echo "no ${PYTHON:-python3} on PATH" >&2; exit 1; }
if ! "$PYTHON" -c 'import jax, flax, optax, pandas, msgpack, yaml, snakemake' 2>/dev/null; then
    echo "$PYTHON lacks one of jax, flax, optax, pandas, msgpack, pyyaml, snakemake" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import jax, sys; sys.exit(jax.default_backend() != "gpu")' 2>/dev/null; then
    echo "$PYTHON's JAX finds no GPU (jax.default_backend() is not gpu)" >&2
    exit 1
fi
# the rules run `python -m pnc.workflow ...`: `python` is $PYTHON, and the package is this tree
shim="$(mktemp -d)"
trap 'rm -rf "$shim"' EXIT
ln -s "$PYTHON" "$shim/python"
export PATH="$shim:$PATH" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}"
start=$(date +%s)
python -m snakemake -s cifar.smk --cores "${CORES:-16}" --resources gpu="${GPUS:-8}" \
    --configfile config/cifar_gpu_check.yaml "$@"
echo "cifar_gpu_check: $(( $(date +%s) - start )) s wall"
