#!/usr/bin/env bash
# The mechanism stage (paper Figures 1 B/C and 3; rules pnc_members and mechanism) on more seeds
# of a stored study, without running the study again: the stored pieces' metric tables are
# restored into a scratch study directory, the selection of each environment is rebuilt from them
# (every seed, as in the study), and only what the mechanism stage reads runs: the seed's data,
# splits and the training runs the mechanism methods use (deterministic: the same code, seeds and
# keys as the pieces' own runs), then the selected P&C members and the diagnostics. Each finished
# (env, seed)'s mechanism output (results/mechanism/{env}/seed{S}.parquet and .json) is stored as a
# piece of its own (pnc.report.pieces) in the mechanism store, optionally committed. Usage:
#
#   scripts/mechanism_seeds.sh [--config FILE] [--store DIR] [--mechanism-store DIR]
#                              [--study DIR] [--envs "Ant Hopper"] [--seeds "1 2"] [--cores N]
#                              [--commit]
#
#   scripts/mechanism_seeds.sh --envs InvertedPendulum --seeds 1          # one seed
#   scripts/mechanism_seeds.sh --seeds "0 1 2 3 4 5 6 7 8 9" --commit     # every seed
#
# Defaults: config/offline.yaml, docs/results/offline/pieces, docs/results/offline/mechanism_pieces,
# mechanism_study/ (scratch, ignored by git), the config's environments, seeds 1-9. A piece already
# in the mechanism store is skipped; seeds are the outer loop. The mechanism table over the seeds
# present: scripts/reference_tables.sh --mechanism-store DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

config=config/offline.yaml
store=docs/results/offline/pieces
mstore=docs/results/offline/mechanism_pieces
study=mechanism_study
envs=""
seeds="1 2 3 4 5 6 7 8 9"
cores=1
commit=0
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        --mechanism-store) mstore="$2"; shift 2 ;;
        --study) study="$2"; shift 2 ;;
        --envs) envs="$2"; shift 2 ;;
        --seeds) seeds="$2"; shift 2 ;;
        --cores) cores="$2"; shift 2 ;;
        --commit) commit=1; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

source scripts/venv.sh
python="$(ready_python ".[workflow]" snakemake)" || exit 2  # $PYTHON, else .venv (set up when missing)
export PATH="$(dirname "$python"):$PATH"       # workflow jobs run `python -m pnc...`

[ -n "$envs" ] || envs="$("$python" -c 'import sys; from pnc.report.variant import read_config; print(" ".join(read_config(sys.argv[1])["envs"]))' "$config")"
mkdir -p "$study"
"$python" -m pnc.report restore-pieces "$store" --study "$study"
evaluation="$("$python" -c 'import sys; from pnc.report.variant import store_evaluation; print(store_evaluation(sys.argv[1]))' "$store")"

failed=()
for seed in $seeds; do
    for env in $envs; do
        if [ -f "$mstore/manifests/$env/seed$seed.json" ]; then
            echo "[mechanism_seeds] $env seed $seed: stored already"
            continue
        fi
        echo "[mechanism_seeds] $env seed $seed: running ($(date -u +%FT%TZ))"
        out="results/mechanism/$env/seed$seed"
        # the restored metric tables are never recomputed: no mtime trigger, and only the rules
        # of the selection and of the mechanism stage's own inputs may run
        if ! nice -n 15 "$python" -m snakemake -s Snakefile -d "$study" --configfile "$config" \
            --config evaluation="$evaluation" --cores "$cores" --keep-going "$out.parquet" \
            --rerun-triggers params input code \
            --allowed-rules select assemble offline_data far_data splits train pnc_members mechanism; then
            echo "[mechanism_seeds] $env seed $seed: FAILED (see $study/logs/)" >&2
            failed+=("$env/seed$seed")
            continue
        fi
        manifest="$study/results/pieces/mechanism/$env/seed$seed.json"
        "$python" -m pnc.report piece "$env" "$seed" "$study/$out.parquet" "$study/$out.json" \
            --out "$manifest" --study "$study"
        if ! "$python" -m pnc.report store-piece "$manifest" --study "$study" --store "$mstore"; then
            echo "[mechanism_seeds] $env seed $seed: its files could not be stored (see above)" >&2
            failed+=("$env/seed$seed")
            continue
        fi
        if [ "$commit" = 1 ]; then
            git add "$mstore"
            git commit -q -m "Mechanism: $env seed $seed (per-point diagnostics, benchmark files)" -- "$mstore"
            echo "[mechanism_seeds] $env seed $seed: committed $(git rev-parse --short HEAD)"
        fi
    done
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "[mechanism_seeds] failed pieces: ${failed[*]}" >&2
    exit 1
fi
echo "[mechanism_seeds] every requested (env, seed) is stored in $mstore"
