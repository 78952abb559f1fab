#!/usr/bin/env bash
# Run a study (default: config/offline.yaml, the reference results) one (env, seed) at a time, at
# low priority, and store each finished (env, seed)'s small outputs (its metric tables, mechanism
# table and benchmark files; pnc.report.pieces) in docs/results/offline/pieces/ as soon as it is
# done, optionally committing them. Resumable: a piece already in the store is skipped, and
# Snakemake reuses every finished job of an interrupted piece. Seeds are the outer loop, so the
# first seed of every environment is done before the second of any. Usage:
#
#   scripts/reference_runs.sh [--config FILE] [--store DIR] [--cores N] [--commit]
#                             [--envs "Ant Hopper"] [--seeds "0 1"]
#                             [--reuse STORE [--reference FILE]]
#
# --reuse runs a variant of a stored study at the cost of what it changes (pnc.report.variant):
# --config is the variant (e.g. config/offline_authors.yaml), --reference the config whose pieces
# STORE holds (default config/offline.yaml). Only the methods whose entries differ are run, with
# the evaluation layout of STORE's pieces, and each piece stored in --store holds their jobs only;
# scripts/reference_tables.sh --reuse STORE adds the unchanged methods' tables from STORE:
#
#   scripts/reference_runs.sh --config config/offline_authors.yaml \
#       --store docs/results/offline_authors/pieces --reuse docs/results/offline/pieces
#
# With the two-phase evaluation (config `evaluation: two_phase`, the default) a piece also holds its
# test phase, which follows the selection over every seed of the environment: an environment's
# first piece runs the validation phase of all its seeds, the others then take minutes each.
# A piece whose jobs fail, or whose files cannot be stored, is reported and left out of the store
# (the loop goes on); its log files are under logs/. Python: $PYTHON, else the project's .venv,
# set up first when it is missing (scripts/venv.sh ready_python; PNC_NO_SETUP=1 stops instead,
# naming the command that sets it up).
set -euo pipefail
cd "$(dirname "$0")/.."

config=config/offline.yaml
store=docs/results/offline/pieces
cores=2
commit=0
envs=""
seeds=""
reuse=""
reference=config/offline.yaml
while [ $# -gt 0 ]; do
    case "$1" in
        --config) config="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        --cores) cores="$2"; shift 2 ;;
        --commit) commit=1; shift ;;
        --envs) envs="$2"; shift 2 ;;
        --seeds) seeds="$2"; shift 2 ;;
        --reuse) reuse="$2"; shift 2 ;;
        --reference) reference="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done

source scripts/venv.sh
python="$(ready_python ".[workflow]" snakemake)" || exit 2
export PATH="$(dirname "$python"):$PATH"  # workflow jobs run `python -m pnc...`
snakemake=("$python" -m snakemake)

if [ -n "$reuse" ]; then
    # the variant's own jobs: its config restricted to the methods it changes
    variant="results/variant_configs/$(basename "$config")"
    changed="$("$python" -m pnc.report variant-config "$config" --reference "$reference" \
        --reuse "$reuse" --out "$variant")" || exit 2
    echo "[reference_runs] $config against $reference: running $changed only; the other methods' tables come from $reuse"
    config="$variant"
fi

read_list() {  # read_list KEY: the config's list KEY (merged into config.yaml), space-separated
    "$python" -c 'import sys; from pnc.report.variant import read_config; print(" ".join(str(v) for v in read_config(sys.argv[1])[sys.argv[2]]))' "$config" "$1"
}
[ -n "$envs" ] || envs="$(read_list envs)"
[ -n "$seeds" ] || seeds="$(read_list seeds)"

# Under Linux's autogroup scheduling (sched_autogroup_enabled=1, the default on many systems) a
# job started in its own session (setsid) competes with every other session as a whole, whatever
# its nice value; lowering that session's autogroup priority makes the runs yield to interactive
# work. Only when this script leads its session (started as `setsid scripts/reference_runs.sh`):
# otherwise the session, and its autogroup, is the caller's (a terminal's), which is left alone.
if [ -w /proc/self/autogroup ] && [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ]; then
    echo 15 > /proc/self/autogroup 2>/dev/null || true
fi

# A run killed with its session (or by a power loss) leaves Snakemake's locks behind, and every
# later piece whose files they name would fail on "Directory cannot be locked". They are stale
# when no Snakemake process works in this directory, and only then are they removed.
here="$(pwd -P)"
running=0
for pid in $(pgrep -f 'snakemake' || true); do
    if [ "$pid" != "$$" ] && [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$here" ] \
        && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'bin/snakemake\|-m snakemake'; then
        running=1
    fi
done
if [ "$running" = 0 ] && [ -n "$(ls -A .snakemake/locks 2>/dev/null)" ]; then
    echo "[reference_runs] removing stale Snakemake locks (no Snakemake process runs here)"
    "${snakemake[@]}" --unlock --configfile "$config" >/dev/null
fi

failed=()
for seed in $seeds; do
    for env in $envs; do
        if [ -f "$store/manifests/$env/seed$seed.json" ]; then
            echo "[reference_runs] $env seed $seed: stored already"
            continue
        fi
        echo "[reference_runs] $env seed $seed: running ($(date -u +%FT%TZ))"
        piece="results/pieces/$env/seed$seed.json"
        # the target first: --configfile takes every value that follows it
        if ! nice -n 15 "${snakemake[@]}" "$piece" --cores "$cores" --keep-going \
            --configfile "$config"; then
            echo "[reference_runs] $env seed $seed: FAILED (see logs/)" >&2
            failed+=("$env/seed$seed")
            continue
        fi
        if ! "$python" -m pnc.report store-piece "$piece" --store "$store"; then
            echo "[reference_runs] $env seed $seed: its files could not be stored (see above)" >&2
            failed+=("$env/seed$seed")
            continue
        fi
        if [ "$commit" = 1 ]; then
            git add "$store"
            git commit -q -m "Results $(dirname "$store"): $env seed $seed (metric tables, mechanism table, benchmark files)" \
                -- "$store"
            echo "[reference_runs] $env seed $seed: committed $(git rev-parse --short HEAD)"
        fi
    done
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "[reference_runs] failed pieces: ${failed[*]}" >&2
    exit 1
fi
echo "[reference_runs] every piece of $config is stored in $store"
