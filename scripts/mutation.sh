#!/usr/bin/env bash
# Mutation testing of one module with mutmut, in a scratch copy of the tracked files (the checkout
# is never modified). Usage:
#   scripts/mutation.sh MODULE.py TEST_FILE_OR_NODE... [-- PYTEST_ARGS...]
# e.g. scripts/mutation.sh pnc/core/conv/correction.py tests/test_conv.py
# Writes the per-mutant results to $MUTATION_DIR/<module>/results.txt (default MUTATION_DIR:
# .mutation/) and prints the killed/total count. Runs outside .ci/run; CPU-heavy (one pytest run
# of the given tests per mutant), so start it with nice on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
module=$1
shift
tests=()
extra=()
while (($#)); do
  if [[ $1 == -- ]]; then shift; extra=("$@"); break; fi
  tests+=("$1"); shift
done
[[ -f $module ]] || { echo "no such module: $module" >&2; exit 2; }
((${#tests[@]})) || { echo "name at least one test file for $module" >&2; exit 2; }
root=$(pwd)
work="${MUTATION_DIR:-$root/.mutation}/$(echo "${module%.py}" | tr / .)"
rm -rf "$work"
mkdir -p "$work"
git ls-files -z | xargs -0 cp --parents -t "$work"
cd "$work"
toml_list() { local out="" x; for x in "$@"; do out+="\"$x\", "; done; echo "[${out%, }]"; }
cat >> pyproject.toml <<CFG

[tool.mutmut]
source_paths = ["pnc"]
only_mutate = ["$module"]
also_copy = ["tests", "config", "workflow", "Snakefile", "cifar.smk", "profiles"]
pytest_add_cli_args_test_selection = $(toml_list "${tests[@]}")
pytest_add_cli_args = $(toml_list -p no:cacheprovider -x -q "${extra[@]}")
# every mutant runs in a process forked from a server that has only collected the tests, never
# run them: a process that ran them holds compiled jit functions of the unmutated code
process_isolation = "forkserver"
forkserver_warmup = "collect"
CFG
# the mutated copy under mutants/ must win over any installed or exported pnc
unset PYTHONPATH
python -m mutmut run --max-children "${MUTATION_JOBS:-1}" || true
python -m mutmut results --all true > results.txt || true
killed=$(grep -c ': killed' results.txt || true)
total=$(grep -c ': ' results.txt || true)
echo "$module: $killed of $total mutants killed (results: $work/results.txt)"
