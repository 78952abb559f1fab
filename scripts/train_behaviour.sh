#!/usr/bin/env bash
# Start or resume the long ARS run of Humanoid or HumanoidStandup in the background, at low
# priority, from its committed state (pnc/studies/mujoco/data/ars_runs/ENV/state.npz). Usage:
#   scripts/train_behaviour.sh ENV [extra options of `python -m pnc.studies.mujoco.data.long_runs train`]
# The log goes to logs/train_behaviour_ENV.log; the process id is printed. Python: $PYTHON, else
# .venv/bin/python, else python on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ]; then
    echo "usage: $0 ENV [--iterations K] [--workers W]" >&2
    exit 2
fi
env_name="$1"
shift
source scripts/venv.sh
python="$(project_python)"
mkdir -p logs
log="logs/train_behaviour_${env_name}.log"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
nohup nice -n 15 "$python" -m pnc.studies.mujoco.data.long_runs train "$env_name" "$@" >>"$log" 2>&1 &
echo "started $env_name: pid $! (log $log)"
