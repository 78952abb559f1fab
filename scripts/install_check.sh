#!/usr/bin/env bash
# The library as a researcher installs it (docs/install.md): build the wheel, install it alone,
# with nothing but its own dependencies, into a fresh environment per end of the version ranges,
# and run scripts/install_check.py there (no workflow package came along, the README's example,
# the three examples of docs/any_model.md):
#   Python 3.13, requirements/newest.txt: the newest versions the ranges allow;
#   Python 3.11, requirements/oldest.txt: the ranges' lower ends.
# Called by scripts/test.sh after the suite, in its venv (uv comes with the [test] extra; the
# newest lock may name releases that only PyPI itself serves). The environments live under
# ~/.cache/pnc/install-check and are made anew each run; uv's cache keeps the downloads, and a
# JAX compilation cache per Python beside them keeps the checks' compiled programs (JAX's own
# JAX_COMPILATION_CACHE_DIR, so the code under check runs unchanged; keyed by the program and
# the JAX version, it loads what a compilation would produce; PNC_COMPILE_CACHE=off turns it
# off). PNC_INSTALL_CHECK=off skips it; a missing Python is an error under CI=true, else skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
if [ "${PNC_INSTALL_CHECK:-on}" = off ]; then
    echo "[install_check] skipped (PNC_INSTALL_CHECK=off)"
    exit 0
fi
uv="$(command -v uv || true)"
[ -n "$uv" ] || { echo "[install_check] uv not found: install the [test] extra" >&2; exit 1; }
find_python() {  # find_python 3.13: that Python on PATH, else pyenv's
    local py
    for py in "python$1" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1"; do
        if command -v "$py" >/dev/null 2>&1 &&
            "$py" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$1')" 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    return 1
}
work="${XDG_CACHE_HOME:-$HOME/.cache}/pnc/install-check"
dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
python -m pip wheel --quiet --no-deps . -w "$dist" >/dev/null
wheel="$(ls "$dist"/pnc-*.whl)"
check() {  # check VERSION LOCK: one fresh environment, the wheel alone, the checks
    local version=$1 lock=$2 py env
    if ! py="$(find_python "$version")"; then
        if [ "${CI:-}" = true ]; then
            echo "[install_check] Python $version not found (PATH, pyenv)" >&2
            return 1
        fi
        echo "[install_check] skipped Python $version: not found on PATH or in pyenv"
        return 0
    fi
    env="$work/py$version"
    rm -rf "$env"
    "$uv" venv --quiet --python "$py" "$env"
    "$uv" pip install --quiet --python "$env/bin/python" -c "$lock" "$wheel"
    echo "[install_check] Python $version, $lock: $(basename "$wheel") alone"
    local -a cache=()
    # off as pnc.runtime.compile_cache reads it: set to "", 0, off, false, no or none
    case "$(echo "${PNC_COMPILE_CACHE-on}" | tr -d '[:space:]' | tr '[:upper:]' '[:lower:]')" in
        "" | 0 | off | false | no | none) ;;
        *) cache=(JAX_COMPILATION_CACHE_DIR="$work/jax-cache-py$version"
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1) ;;
    esac
    # from another folder, so that `import pnc` is the installed wheel, not this checkout
    (cd "$dist" && env "${cache[@]}" "$env/bin/python" "$root/scripts/install_check.py")
}
# the two environments side by side (most of each is compilation, on one core), each its own log
check 3.13 requirements/newest.txt >"$dist/newest.log" 2>&1 &
newest=$!
check 3.11 requirements/oldest.txt >"$dist/oldest.log" 2>&1 &
oldest=$!
status=0
wait "$newest" || status=1
cat "$dist/newest.log"
wait "$oldest" || status=1
cat "$dist/oldest.log"
[ "$status" = 0 ] || echo "[install_check] FAILED (see above)" >&2
exit "$status"
