#!/usr/bin/env bash
# The cluster path on a real SLURM: starts a single-node SLURM (munge, slurmctld, slurmd) on
# localhost under a temporary directory, runs the tiny MuJoCo config (.test/config.yaml) through
# `--profile profiles/slurm`, and checks that
#   1. every submitted sbatch line carries the rule's threads (--cpus-per-task) and memory (--mem);
#   2. results/results.csv, all_configs.csv and selection.json are byte-identical to a local run;
#   3. `scancel` of a running job, then a rerun, resumes with no finished output recomputed;
#   4. a failing job is reported by Snakemake with its SLURM log path;
#   5. a job whose declared memory is too small fails (no hang), its SLURM log naming the step's
#      out-of-memory state (`srun: error: ...: task 0: Out Of Memory`).
# Every daemon it starts is stopped by its process id on exit, also on failure. Exits non-zero on
# any difference. Needs root (it installs slurm-wlm and munge with apt-get when they are missing)
# and a python with pnc, snakemake and the SLURM executor plugin: the one on PATH, else the
# project's .venv (never set up here, as root: without either it stops at once, naming the
# command to run first); about 20 minutes on 2 cores.
#
# Environment: SLURM_CHECK_DIR (default: a new mktemp -d), SLURM_CHECK_PARTITION (default
# pnccheck), SLURM_CHECK_JOBS (concurrent SLURM jobs, default 2), SLURM_CHECK_KEEP=1 keeps the
# temporary directory, SLURM_CHECK_FAULTS_ONLY=1 runs only the failing and out-of-memory jobs. Local cluster settings (partition, no account, squeue status) live in a
# profile generated under the temporary directory, never in the repository.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
# --- python: before anything is installed, started or written --------------------------------
IMPORTS='import pnc, snakemake, snakemake_executor_plugin_slurm'
if ! { command -v python >/dev/null && (cd / && python -c "$IMPORTS") >/dev/null 2>&1; }; then
    if [ -x "$REPO/.venv/bin/python" ] && (cd / && "$REPO/.venv/bin/python" -c "$IMPORTS") \
        >/dev/null 2>&1; then
        export PATH="$REPO/.venv/bin:$PATH"
    else
        echo "[slurm_check] no python with pnc, snakemake and the SLURM executor plugin on PATH" \
            "or in $REPO/.venv; set up the project's .venv first (as yourself, not root):" >&2
        echo "    cd $REPO && source scripts/venv.sh && setup_venv \".[workflow]\"" >&2
        exit 2
    fi
fi
START=$(date +%s)
TMP="${SLURM_CHECK_DIR:-$(mktemp -d /tmp/pnc-slurm-check.XXXXXX)}"
mkdir -p "$TMP"
TMP="$(cd "$TMP" && pwd)"
PARTITION="${SLURM_CHECK_PARTITION:-pnccheck}"
JOBS="${SLURM_CHECK_JOBS:-2}"
CONFIG=.test/config.yaml
FAILURES=()
PIDS=()

say() { printf '[slurm_check %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
fail() { say "FAIL: $*"; FAILURES+=("$*"); }

cleanup() {
    local code=$?
    if [ -n "${SMK:-}" ] && kill -0 "$SMK" 2>/dev/null; then  # a Snakemake run still going
        kill -TERM "$SMK" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$SMK" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$SMK" 2>/dev/null && kill -9 "$SMK" 2>/dev/null || true
    fi
    # SLURM jobs of this cluster, then the daemons (last started, first stopped)
    [ ${#PIDS[@]} -lt 2 ] || scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    for (( i=${#PIDS[@]}-1; i>=0; i-- )); do
        pid=${PIDS[i]}
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
            say "stopped daemon pid $pid"
        fi
    done
    if [ -n "${LINKED:-}" ] && [ "$(readlink "$LINKED")" = "$TMP/slurm.conf" ]; then
        rm -f "$LINKED"
        say "removed $LINKED"
    fi
    if [ "${SLURM_CHECK_KEEP:-0}" != 1 ] && [ $code -eq 0 ]; then rm -rf "$TMP"; fi
    [ $code -eq 0 ] || say "logs and state kept in $TMP"
    exit $code
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- packages -------------------------------------------------------------------------------
need=()
for cmd in munged slurmctld slurmd sbatch squeue scancel; do
    command -v "$cmd" >/dev/null || need+=("$cmd")
done
if [ ${#need[@]} -gt 0 ]; then
    say "missing ${need[*]}: installing slurm-wlm and munge"
    [ "$(id -u)" -eq 0 ] || { say "installing needs root"; exit 2; }
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

# --- configuration --------------------------------------------------------------------------
CPUS=$(nproc)
MEM_MB=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
mkdir -p "$TMP"/{munge,state,spool,log}
chmod 700 "$TMP/munge"
CONF=(python "$REPO/scripts/slurm_conf.py")
"${CONF[@]}" --dir "$TMP" --cpus "$CPUS" --memory-mb "$MEM_MB" --partition "$PARTITION" \
    > "$TMP/slurm.conf"
"${CONF[@]}" --cgroup-conf > "$TMP/cgroup.conf"
export SLURM_CONF="$TMP/slurm.conf"
# The jobs' own `srun` (the plugin's job step) runs with the SLURM_* variables removed, so it reads
# the default /etc/slurm/slurm.conf: link it to this configuration while the check runs, unless
# the machine has a SLURM configuration of its own.
LINKED=""
if [ -e /etc/slurm/slurm.conf ] || [ -L /etc/slurm/slurm.conf ]; then
    say "/etc/slurm/slurm.conf exists: this machine has a SLURM of its own; not touching it"
    exit 2
fi
mkdir -p /etc/slurm
ln -s "$TMP/slurm.conf" /etc/slurm/slurm.conf
LINKED=/etc/slurm/slurm.conf
mkdir -p "$TMP/profile"
"${CONF[@]}" --profile-from "$REPO/profiles/slurm/config.yaml" --partition "$PARTITION" \
    --jobs "$JOBS" > "$TMP/profile/config.yaml"
say "SLURM config $SLURM_CONF: 1 node, $CPUS CPUs, $MEM_MB MB, partition $PARTITION"

# --- daemons --------------------------------------------------------------------------------
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$TMP/munge/munge.key"
munged --force --key-file="$TMP/munge/munge.key" --socket="$TMP/munge/munge.socket" \
    --pid-file="$TMP/munge/munged.pid" --log-file="$TMP/log/munged.log" \
    --seed-file="$TMP/munge/munged.seed"
for _ in $(seq 50); do [ -s "$TMP/munge/munged.pid" ] && break; sleep 0.1; done
PIDS+=("$(cat "$TMP/munge/munged.pid")")
slurmctld -D -f "$SLURM_CONF" > "$TMP/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" > "$TMP/log/slurmd.out" 2>&1 &
PIDS+=($!)
say "daemons: munged ${PIDS[0]}, slurmctld ${PIDS[1]}, slurmd ${PIDS[2]}"
for _ in $(seq 60); do
    sinfo -h -o '%t' 2>/dev/null | grep -qx idle && break
    sleep 1
done
sinfo -h -o '%t' | grep -qx idle || { say "the node did not come up"; sinfo || true; exit 1; }
say "node up: $(sinfo -h -o '%P %t %c CPUs %m MB')"

# --- workflow copies ------------------------------------------------------------------------
copy() {  # what the workflow needs; the package comes from PYTHONPATH / the environment
    mkdir -p "$1"
    cp -r "$REPO"/{workflow,config,.test,envs,profiles,Snakefile,config.yaml} "$1"/
}
export PYTHONWARNINGS=ignore
PROFILE=(--profile "$REPO/profiles/slurm" --profile "$TMP/profile")
run() {  # run LOG DIR ARGS...: snakemake ARGS in DIR, in the background (signals reach the trap)
    local log=$1 dir=$2; shift 2
    (cd "$dir" && exec snakemake "$@") > "$log" 2>&1 &
    SMK=$!
    local code=0; wait $SMK || code=$?
    SMK=""
    return $code
}

if [ "${SLURM_CHECK_FAULTS_ONLY:-0}" != 1 ]; then
# --- local reference ------------------------------------------------------------------------
copy "$TMP/local"
say "local reference run (--cores $CPUS)"
t0=$(date +%s)
run "$TMP/log/local.log" "$TMP/local" --cores "$CPUS" --configfile "$CONFIG" \
    || { say "local run failed: $TMP/log/local.log"; exit 1; }
say "local run: $(( $(date +%s) - t0 )) s"

# --- SLURM run, interrupted by scancel of a running job, then resumed --------------------
copy "$TMP/cluster"
say "SLURM run through profiles/slurm; scancel of a running train job"
t0=$(date +%s)
(cd "$TMP/cluster" && exec snakemake "${PROFILE[@]}" --configfile "$CONFIG") \
    > "$TMP/log/cluster1.log" 2>&1 &
SMK=$!
cancelled=""
for _ in $(seq 900); do
    kill -0 $SMK 2>/dev/null || break
    if compgen -G "$TMP/cluster/results/runs/*/seed0/*/run.msgpack" >/dev/null; then
        cancelled=$(squeue -h -t RUNNING -o '%i %k' | awk '$2 ~ /rule_(train|evaluate)_/ {print $1; exit}')
        if [ -n "$cancelled" ]; then
            scancel "$cancelled"
            say "scancel $cancelled ($(squeue -h -j "$cancelled" -t all -o '%k' 2>/dev/null))"
            break
        fi
    fi
    sleep 1
done
code=0; wait $SMK || code=$?
SMK=""
[ -n "$cancelled" ] || fail "no running train/evaluate job was found to cancel"
[ $code -ne 0 ] || fail "the run with a cancelled job exited 0"
grep -q "SLURM-job '$cancelled' failed, SLURM status is: 'CANCELLED'" "$TMP/log/cluster1.log" \
    || fail "the cancelled job $cancelled is not reported as CANCELLED (log/cluster1.log)"
[ ! -e "$TMP/cluster/results/results.csv" ] || fail "results.csv exists after the cancelled run"
# every output finished before the rerun, with its modification time
(cd "$TMP/cluster" && find results resources -type f ! -name '*.tmp' -printf '%p %T@\n' | sort) \
    > "$TMP/before.txt"
say "resuming ($(wc -l < "$TMP/before.txt") finished files)"
run "$TMP/log/cluster2.log" "$TMP/cluster" "${PROFILE[@]}" --configfile "$CONFIG" \
    || fail "the resumed SLURM run failed (log/cluster2.log)"
say "SLURM runs: $(( $(date +%s) - t0 )) s"
(cd "$TMP/cluster" && find results resources -type f ! -name '*.tmp' -printf '%p %T@\n' | sort) \
    > "$TMP/after.txt"
recomputed=$(comm -23 "$TMP/before.txt" "$TMP/after.txt" | wc -l)
[ "$recomputed" -eq 0 ] || fail "$recomputed finished files were recomputed on resume:
$(comm -23 "$TMP/before.txt" "$TMP/after.txt" | head)"
say "resume: $(comm -13 "$TMP/before.txt" "$TMP/after.txt" | wc -l) files added, $recomputed recomputed"

# --- results equal the local run --------------------------------------------------------------
for out in results/results.csv results/all_configs.csv results/selection.json; do
    if cmp -s "$TMP/local/$out" "$TMP/cluster/$out"; then
        say "identical: $out"
    else
        fail "$out differs from the local run"
    fi
done

# --- resources in the sbatch lines -------------------------------------------------------------
cat "$TMP/log/cluster1.log" "$TMP/log/cluster2.log" | grep -o 'sbatch call: .*' > "$TMP/sbatch.txt" || true
python "$REPO/scripts/slurm_conf.py" --check-sbatch "$TMP/sbatch.txt" \
    --rules-of "$TMP/log/cluster1.log" "$TMP/log/cluster2.log" || fail "sbatch lines: see above"
say "example: $(grep -m1 'rule_train_' "$TMP/sbatch.txt" || true)"
fi

# --- faults: a failing job, a job over its memory --------------------------------------------
mkdir -p "$TMP/faults"
cat > "$TMP/faults/Snakefile" <<'EOF'
rule all:
    input: "fails.txt", "oom.txt"

rule fails:
    output: "fails.txt"
    log: "logs/fails.log"
    benchmark: "benchmarks/fails.tsv"
    resources: mem_mb=1000, runtime=5
    shell: "echo 'the job fails on purpose' > {log}; exit 3"

rule oom:
    output: "oom.txt"
    log: "logs/oom.log"
    benchmark: "benchmarks/oom.tsv"
    resources: mem_mb=400, runtime=5
    shell:
        "python -c 'import time; b = bytearray(1500 * 2**20); b[::4096] = b\"x\" * len(b[::4096]);"
        " time.sleep(60)' > {log} 2>&1; touch {output}"
EOF
say "faults: a failing job and a job over its 400 MB"
run "$TMP/log/faults.log" "$TMP/faults" "${PROFILE[@]}" --keep-going && fail "the faults workflow exited 0"
error_of() { grep -A8 "^Error in rule $1:" "$TMP/log/faults.log" || true; }
failed_log=$(error_of fails | grep -o '/[^ ]*/slurm_logs/rule_fails/[0-9]*\.log' | head -1)
if [ -n "$failed_log" ] && [ -f "$failed_log" ] \
    && error_of fails | grep -q "SLURM status is: 'FAILED'" \
    && grep -q "the job fails on purpose" "$TMP/faults/logs/fails.log"; then
    say "failing job: $(error_of fails | grep -o "SLURM-job .* is: 'FAILED'"), log: $failed_log"
else
    fail "the failing job is not reported as FAILED with an existing SLURM log (log/faults.log)"
fi
# The rule's command runs in the job's step 0 (the plugin's srun), so the job itself ends FAILED
# (what squeue shows); SLURM names the step's out-of-memory state in the job's log.
oom_log=$(error_of oom | grep -o '/[^ ]*/slurm_logs/rule_oom/[0-9]*\.log' | head -1)
if [ -n "$oom_log" ] && [ -f "$oom_log" ] && grep -q "Out Of Memory" "$oom_log" \
    && error_of oom | grep -q "SLURM status is: '\(FAILED\|OUT_OF_MEMORY\)'"; then
    say "job over its memory: $(error_of oom | grep -o "SLURM-job .* is: '[A-Z_]*'"), log: $oom_log"
    say "  $(grep -m1 "Out Of Memory" "$oom_log")"
else
    fail "the job over its memory is not reported with SLURM's Out Of Memory in its log (log/faults.log)"
fi
[ ! -e "$TMP/faults/oom.txt" ] || fail "the job over its memory produced its output"

# --- summary ---------------------------------------------------------------------------------
ELAPSED=$(( $(date +%s) - START ))
if [ ${#FAILURES[@]} -eq 0 ]; then
    say "PASS in ${ELAPSED} s"
    exit 0
fi
say "${#FAILURES[@]} check(s) failed in ${ELAPSED} s:"
printf '  - %s\n' "${FAILURES[@]}"
SLURM_CHECK_KEEP=1
exit 1
