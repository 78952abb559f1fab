#!/usr/bin/env bash
# Set up a virtual environment with the pinned dependencies (Python 3.11) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
setup_venv ".[test]"
ruff check .
python -m pytest "$@"
