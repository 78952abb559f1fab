#!/usr/bin/env bash
# Refresh the lock files, on purpose only (docs/install.md); CI installs from them, it never
# resolves afresh. uv (the [test] extra) compiles them from pyproject.toml:
#   bash scripts/lock.sh            # all three, keeping every version already locked
#   bash scripts/lock.sh --upgrade  # all three at the newest versions the ranges allow
# requirements/workflow.txt  the workflows' exact stack (extras test and peers, which include
#                            workflow), any platform, Python 3.11 and newer: what the reference
#                            results were made with; scripts/quick.sh, scripts/test.sh and
#                            envs/pnc.yaml install from it; requirements/constraints.txt holds
#                            back what it names, and why
# requirements/newest.txt    the library alone at the ranges' upper ends, Python 3.13
# requirements/oldest.txt    the library alone at the ranges' lower ends, Python 3.11
# A change to workflow.txt moves the workflows' results: compare the quick default and the tiny
# CIFAR run byte for byte before and after (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."
uv="$(command -v uv || echo .venv/bin/uv)"
compile() { "$uv" pip compile --quiet --no-header "$@"; }
header() { printf '# %s\n# Made by scripts/lock.sh (uv pip compile %s); edit pyproject.toml, not this file.\n' "$1" "$2"; }
args=("$@")
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for spec in "workflow|--extra test --extra peers --universal --python-version 3.11 -c requirements/constraints.txt|the workflows' exact stack" \
    "newest|--python-version 3.13|the library's dependencies at the newest versions its ranges allow" \
    "oldest|--python-version 3.11 --resolution lowest-direct|the library's dependencies at its ranges' lower ends"; do
    IFS='|' read -r name flags what <<<"$spec"
    out="requirements/$name.txt"
    [ -f "$out" ] && cp "$out" "$tmp/$name.txt"  # uv keeps the versions of an existing output
    # shellcheck disable=SC2086
    compile pyproject.toml $flags "${args[@]}" -o "$tmp/$name.txt"
    { header "$what" "$flags"; cat "$tmp/$name.txt"; } >"$out"
    echo "[lock] $out: $(grep -c '^[a-zA-Z]' "$out") packages"
done
