# Sourced by quick.sh and test.sh: create .venv with Python 3.11 if missing and install the
# project's pinned dependencies into it. Usage: setup_venv SPEC (e.g. "." or ".[test]").
setup_venv() {
    local py="${PYTHON:-python3.11}"
    command -v "$py" >/dev/null 2>&1 || py=python3
    "$py" -c 'import sys; assert sys.version_info[:2] == (3, 11), f"Python 3.11 is required, found {sys.version.split()[0]}"'
    [ -x .venv/bin/python ] || "$py" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    # pip byte-compiles what it installs one file at a time; compileall does it on every core.
    # The compiled files are needed: where PYTHONDONTWRITEBYTECODE is set, Python never writes
    # them on import, and every job would compile its imports from source.
    .venv/bin/python -m pip install --quiet --no-compile -e "$1"
    # Not the packages' own test suites nor PyOpenGL (mujoco's renderer): no job imports them,
    # and they are 5,800 of the venv's 13,700 modules.
    .venv/bin/python -m compileall -q -j 0 -x '/(tests?|OpenGL)/' \
        "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
    compile_project
    export PATH="$PWD/.venv/bin:$PATH"  # workflow jobs run `python -m pnc...`
}

# Sourced by quick.sh and test.sh (and setup_venv): byte-compile the project's own modules (pnc/),
# which the editable install leaves in the checkout. Where PYTHONDONTWRITEBYTECODE is set, Python
# never writes them on import, and every job would compile the 30-odd modules it imports from
# source (about 0.07 CPU s a job, docs/performance.md). Only new or changed files are compiled;
# an up-to-date tree takes a fraction of a second. Usage: compile_project
compile_project() {
    .venv/bin/python -m compileall -q -j 0 pnc >/dev/null
}

# Sourced by the long-run scripts: print the Python to use, $PYTHON if set, else the project's
# .venv/bin/python, else python on PATH (no set-up). Usage: python="$(project_python)"
project_python() {
    if [ -n "${PYTHON:-}" ]; then
        echo "$PYTHON"
    elif [ -x .venv/bin/python ]; then
        echo "$PWD/.venv/bin/python"  # absolute: jobs may run in another directory (snakemake -d)
    else
        echo python
    fi
}

# Sourced by quick.sh and test.sh: keep the jobs' compiled programs in the user's cache directory,
# so that a later run on this machine (from a new clone too) loads them instead of compiling
# (pnc.runtime.compile_cache, docs/performance.md). A PNC_COMPILE_CACHE already set wins: off runs
# without the cache, another directory moves it. Usage: keep_compile_cache NAME (e.g. jax).
keep_compile_cache() {
    export PNC_COMPILE_CACHE="${PNC_COMPILE_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/pnc/$1}"
}

# Sourced by the long-run scripts: print the Python to use once it imports pnc and MODULES.
# $PYTHON if set (nothing is installed for it: when it cannot, stop naming what to run); else the
# project's .venv, set up first as quick.sh does (setup_venv SPEC) when it is missing or lacks one
# of them; with PNC_NO_SETUP=1, stop instead, naming the command that sets it up. Messages go to
# stderr. Usage: python="$(ready_python . snakemake)" || exit 2
ready_python() {
    local spec=$1 module code="import pnc"
    shift
    for module in "$@"; do code+=", $module"; done
    local fix="source scripts/venv.sh && setup_venv \"$spec\""
    if [ -n "${PYTHON:-}" ]; then
        if "$PYTHON" -c "$code" >/dev/null 2>&1; then
            echo "$PYTHON"
            return 0
        fi
        echo "PYTHON=$PYTHON cannot run \"$code\": unset PYTHON to use the project's .venv, or" \
            "install the project there (the .venv: $fix)" >&2
        return 2
    fi
    if [ -x .venv/bin/python ] && .venv/bin/python -c "$code" >/dev/null 2>&1; then
        echo "$PWD/.venv/bin/python"  # absolute: jobs may run in another directory (snakemake -d)
        return 0
    fi
    if [ "${PNC_NO_SETUP:-0}" = 1 ]; then
        echo "the project's .venv is missing or cannot run \"$code\"; set it up with: $fix" >&2
        return 2
    fi
    echo "[venv] the project's .venv is missing or cannot run \"$code\": setting it up" \
        "(setup_venv $spec, about a minute with a warm pip cache)" >&2
    if ! setup_venv "$spec" >&2 || ! .venv/bin/python -c "$code" >/dev/null 2>&1; then
        echo "setting up .venv failed (see above); run: $fix" >&2
        return 2
    fi
    echo "$PWD/.venv/bin/python"
}
