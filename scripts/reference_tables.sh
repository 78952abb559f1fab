#!/usr/bin/env bash
# Rebuild a long study's results and tables from its stored pieces alone (pnc.report.pieces):
# restore every piece of the store into a fresh study directory, run only the selection and
# table rules there (Snakemake's --allowed-rules: nothing upstream of the metric tables runs, so
# no trained network and no dataset is needed), and write the reference folder
# (python -m pnc.report export). Usage:
#
#   scripts/reference_tables.sh [--config FILE] [--store DIR] [--study DIR] [--out DIR]
#
# Defaults: config/offline.yaml, docs/results/offline/pieces, reference_study/ (scratch, ignored
# by git), docs/results/offline. The study must hold every (env, seed) of the config: an
# incomplete store is refused by the selection (missing metric tables) and by the export.
set -euo pipefail
cd "$(dirname "$0")/.."

config=config/offline.yaml
store=docs/results/offline/pieces
study=reference_study
out=docs/results/offline
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        --study) study="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

source scripts/venv.sh
python="$(project_python)"
export PATH="$(dirname "$python"):$PATH"

mkdir -p "$study"
"$python" -m pnc.report restore-pieces "$store" --study "$study"
"$python" -m snakemake -s Snakefile -d "$study" --configfile "$config" --cores 1 \
    results/results.csv results/tables/cross_env.csv \
    --allowed-rules select aggregate report_tables
"$python" -m pnc.report export "$study" --out "$out" --force
echo "[reference_tables] $out rebuilt from $store"
