#!/usr/bin/env bash
# The quick default: set up .venv with the workflows' locked stack if it is missing or out of date
# (Python 3.11 or newer; requirements/workflow.txt), then run the whole MuJoCo study on
# config/quick.yaml (2 environments, offline behaviour data, 2 seeds, all eight methods, reduced
# grids) and its report. Extra arguments go to snakemake (e.g. --cores 4, -n).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
if venv_is_set_up ".[workflow]" || venv_is_set_up ".[test,peers]"; then
    compile_project
else
    setup_venv ".[workflow]"  # compiles the project's modules too
fi
export PATH="$PWD/.venv/bin:$PATH"
keep_compile_cache jax
# the self-contained HTML report of the tables and figures is written by the same run, once its
# jobs are done (a second snakemake call would build the DAG again: about 3 s)
report=()
if [[ " $* " != *" -n "* && " $* " != *" --dry-run "* ]]; then
    report=(--report results/report.html --report-after-run)
fi
snakemake --cores "${CORES:-2}" --configfile config/quick.yaml "${report[@]}" "$@"
if ((${#report[@]})); then
    echo "results: results/results.csv, results/all_configs.csv, results/tables/, figures/, results/report.html"
fi
