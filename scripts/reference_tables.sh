#!/usr/bin/env bash
# Rebuild a long study's results, tables and figures from its stored pieces alone
# (pnc.report.pieces): restore every piece of the store into a fresh study directory, run only the
# selection, table and figure rules there (Snakemake's --allowed-rules: nothing upstream of the
# metric tables runs, so no trained network and no dataset is needed), and write the reference
# folder (python -m pnc.report export). Usage:
#
#   scripts/reference_tables.sh [--config FILE] [--store DIR] [--study DIR] [--out DIR]
#                               [--mechanism] [--cores N] [--reuse STORE [--reference FILE]]
#
# --reuse builds a variant's folder (pnc.report.variant; scripts/reference_runs.sh --reuse made its
# pieces): --store holds the variant's pieces (the methods it changes), STORE the pieces of the
# reference config --reference (default config/offline.yaml), whose files of the other methods are
# restored beside them:
#
#   scripts/reference_tables.sh --config config/offline_authors.yaml \
#       --store docs/results/offline_authors/pieces --reuse docs/results/offline/pieces \
#       --study authors_study --out docs/results/offline_authors
#
# The evaluation (`full` or `two_phase`) is the one the store's pieces were made with.
#
# --mechanism-store DIR builds the mechanism table from the mechanism pieces that
# scripts/mechanism_seeds.sh stored in DIR, over the seeds stored for every environment (the
# mean and spread over them, pnc.report.mechanism_table), instead of running the stage:
#
#   scripts/reference_tables.sh --mechanism-store docs/results/offline/mechanism_pieces
#
# --mechanism also runs the mechanism stage (paper Figures 1 B/C and 3, the mechanism table) on
# the config's mechanism seed (default: the first) of every environment, with the selection over
# all seeds: it needs that seed's data, splits and base network, which the pieces do not hold, so
# those jobs run again (deterministic, the same code and seeds as the pieces' own runs; tens of
# CPU seconds per environment, Subspace's own run included) and then the mechanism jobs (minutes
# per environment). The restored metric tables are never recomputed: Snakemake's mtime trigger is
# off for this run, so a freshly trained base network does not make them look outdated.
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
mechanism=0
cores=1
reuse=""
reference=config/offline.yaml
mstore=""
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        --study) study="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --mechanism) mechanism=1; shift ;;
        --mechanism-store) mstore="$2"; shift 2 ;;
        --cores) cores="$2"; shift 2 ;;
        --reuse) reuse="$2"; shift 2 ;;
        --reference) reference="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

source scripts/venv.sh
python="$(ready_python ".[workflow]" snakemake)" || exit 2  # $PYTHON, else .venv (set up when missing)
export PATH="$(dirname "$python"):$PATH"

mkdir -p "$study"
if [ -n "$reuse" ]; then
    changed="$("$python" -m pnc.report variant-config "$config" --reference "$reference" \
        --reuse "$reuse" --out "$study/variant_config.yaml")" || exit 2
    # the reference's files of the methods the variant leaves alone, then the variant's own
    "$python" -m pnc.report restore-pieces "$reuse" --study "$study" --skip-methods $changed
fi
"$python" -m pnc.report restore-pieces "$store" --study "$study"
# the evaluation the pieces were made with (the stored reference: full)
evaluation="$("$python" -c 'import sys; from pnc.report.variant import store_evaluation; print(store_evaluation(sys.argv[1]))' "$store")"
envs="$("$python" -c 'import sys; from pnc.report.variant import read_config; print(" ".join(read_config(sys.argv[1])["envs"]))' "$config")"
figures=(figures/frontier_all.png)
for env in $envs; do figures+=("figures/frontier/$env.png" "figures/metrics/$env.png"); done
"$python" -m snakemake -s Snakefile -d "$study" --configfile "$config" \
    --config evaluation="$evaluation" --cores "$cores" results/results.csv results/tables/cross_env.csv "${figures[@]}" \
    --allowed-rules select assemble aggregate report_tables report_frontier_overview report_frontier \
    report_metrics
if [ "$mechanism" = 1 ]; then
    # the mechanism table, and each environment's mechanism figures asked for by one of them
    figures=()
    for env in $envs; do figures+=("figures/mechanism/$env/magnitudes.png"); done
    nice -n 15 "$python" -m snakemake -s Snakefile -d "$study" --configfile "$config" \
        --config evaluation="$evaluation" --cores "$cores" --keep-going \
        results/tables/mechanism.csv "${figures[@]}" \
        --rerun-triggers params input code \
        --allowed-rules offline_data far_data splits train pnc_members mechanism \
        mechanism_figures mechanism_table
fi
if [ -n "$mstore" ]; then
    "$python" -m pnc.report restore-pieces "$mstore" --study "$study"
    # the seeds stored for every environment of the config
    files="$("$python" -c '
import sys, yaml
from pnc.report.pieces import seeds_of_every_env
envs = yaml.safe_load(open(sys.argv[2]))["envs"]
seeds = seeds_of_every_env(sys.argv[1], envs)
print(" ".join(f"{sys.argv[3]}/results/mechanism/{e}/seed{s}.parquet" for e in envs for s in seeds))
' "$mstore" "$config" "$study")"
    mkdir -p "$study/results/tables"
    "$python" -m pnc.workflow mechanism_report --threads 1 table $files \
        --all-configs "$study/results/all_configs.csv" --out "$study/results/tables" \
        --grid "$study/results/grid/pnc.json" "$study/results/grid/pnc_nocorr.json"
fi
"$python" -m pnc.report export "$study" --out "$out" --force
echo "[reference_tables] $out rebuilt from $store"
