#!/usr/bin/env bash
# Set up a virtual environment with the pinned dependencies (Python 3.11) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
export PATH="$PWD/.venv/bin:$PATH"  # workflow jobs run `python -m pnc...`
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
