#!/usr/bin/env bash
# The quick default: set up .venv with the pinned dependencies if missing (Python 3.11), then run
# the whole study on config/quick.yaml (2 environments, offline behaviour data, 2 seeds, all eight
# methods, reduced grids) and its report. Extra arguments go to snakemake (e.g. --cores 4, -n).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import pnc, snakemake' >/dev/null 2>&1; then
    setup_venv "."  # compiles the project's modules too
else
    compile_project
fi
export PATH="$PWD/.venv/bin:$PATH"
keep_compile_cache jax
snakemake --cores "${CORES:-2}" --configfile config/quick.yaml "$@"
# self-contained HTML report of the tables and figures
if [[ " $* " != *" -n "* && " $* " != *" --dry-run "* ]]; then
    snakemake --configfile config/quick.yaml --report results/report.html
    echo "results: results/results.csv, results/all_configs.csv, results/tables/, figures/, results/report.html"
fi
