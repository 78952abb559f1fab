#!/usr/bin/env bash
# Set up .venv with the workflows' locked stack and the test tools (Python 3.11 or newer;
# requirements/workflow.txt) and run the test suite; with no arguments (CI) also the numerical
# tests at another instruction-set level and the library installed alone at both ends of its
# version ranges (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
if venv_is_set_up ".[test,peers]"; then
    compile_project
    export PATH="$PWD/.venv/bin:$PATH"
else
    setup_venv ".[test,peers]"  # peers: laplax, for tests/test_bench_peers.py
fi
ruff check .
snakefmt --check Snakefile cifar.smk workflow/  # the Snakemake files ([tool.snakefmt])
keep_compile_cache jax-tests  # docs/testing.md
# Test files run in parallel worker processes, each file whole on one worker (its module-scoped
# fixtures, such as the tiny workflow runs, are built once); PNC_TEST_WORKERS=0 runs serially.
python -m pytest -n "${PNC_TEST_WORKERS:-2}" --dist loadfile "$@"
if [ $# -eq 0 ]; then
    bash scripts/test_isa.sh       # the numerical test files at another instruction-set level
    bash scripts/install_check.sh  # the wheel alone on Python 3.13 (newest) and 3.11 (oldest)
fi
