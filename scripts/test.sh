#!/usr/bin/env bash
# Set up a virtual environment with the pinned dependencies (Python 3.11) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
setup_venv ".[test]"
ruff check .
# The suite's compiled programs are kept between runs, outside the checkout, so that a later run
# (a new clone included) loads them instead of compiling (pnc.compile_cache; docs/testing.md).
# PNC_COMPILE_CACHE=off runs without it, another directory moves it.
export PNC_COMPILE_CACHE="${PNC_COMPILE_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/pnc/jax-tests}"
# Test files run in parallel worker processes, each file whole on one worker (its module-scoped
# fixtures, such as the tiny workflow runs, are built once); PNC_TEST_WORKERS=0 runs serially.
python -m pytest -n "${PNC_TEST_WORKERS:-2}" --dist loadfile "$@"
