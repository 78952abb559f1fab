#!/usr/bin/env bash
# Set up a virtual environment with the pinned dependencies (Python 3.11) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
setup_venv ".[test,peers]"  # peers: laplax, for tests/test_bench_peers.py
ruff check .
snakefmt --check Snakefile cifar.smk workflow/  # the Snakemake files ([tool.snakefmt])
keep_compile_cache jax-tests  # docs/testing.md
# Test files run in parallel worker processes, each file whole on one worker (its module-scoped
# fixtures, such as the tiny workflow runs, are built once); PNC_TEST_WORKERS=0 runs serially.
python -m pytest -n "${PNC_TEST_WORKERS:-2}" --dist loadfile "$@"
# With no arguments (CI), the numerical test files once more at another instruction-set level.
if [ $# -eq 0 ]; then bash scripts/test_isa.sh; fi
