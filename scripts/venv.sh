# Sourced by the scripts: print the Python to create .venv with: $PYTHON if set, else the first of
# python3.11, python3.12, python3.13 and python3 on PATH (then pyenv's) that is 3.11 or newer.
# The reference results were made on 3.11, which comes first. Usage: py="$(base_python)"
base_python() {
    local candidates=("${PYTHON:-}" python3.11 python3.12 python3.13 python3) py
    for py in "${candidates[@]}" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[123]*/bin/python3; do
        [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
        if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$py"
            return 0
        fi
    done
    echo "Python 3.11 or newer is required (none found on PATH; PYTHON=... names one)" >&2
    return 1
}

# Sourced by quick.sh and test.sh: create .venv if missing and install the project with the extras
# of SPEC into it, every package at the version of the workflows' lock file
# (requirements/workflow.txt, docs/install.md), so that the results are those of the reference
# stack. Usage: setup_venv SPEC (e.g. ".[workflow]" or ".[test,peers]").
setup_venv() {
    local py
    py="$(base_python)" || return 1
    [ -x .venv/bin/python ] || "$py" -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    # uv installs the locked stack about four times faster than pip (docs/install.md); pip does
    # it where uv cannot be had or fails. Neither byte-compiles here: compileall does it below on
    # every core. The compiled files are needed: where PYTHONDONTWRITEBYTECODE is set, Python
    # never writes them on import, and every job would compile its imports from source.
    if ! { .venv/bin/python -m pip install --quiet -c requirements/workflow.txt uv &&
        .venv/bin/uv pip install --quiet --python .venv/bin/python -c requirements/workflow.txt \
            -e "$1"; }; then
        echo "[venv] uv could not install the stack; installing with pip" >&2
        .venv/bin/python -m pip install --quiet --no-compile -c requirements/workflow.txt -e "$1"
    fi
    # Not the packages' own test suites nor PyOpenGL (mujoco's renderer): no job imports them,
    # and they are 5,800 of the venv's 13,700 modules.
    .venv/bin/python -m compileall -q -j 0 -x '/(tests?|OpenGL)/' \
        "$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null
    compile_project
    venv_stamp "$1" >.venv/.pnc-setup  # what was installed, from which lock (venv_is_set_up)
    export PATH="$PWD/.venv/bin:$PATH"  # workflow jobs run `python -m pnc...`
}

# What setup_venv SPEC installs: the spec, the lock file's and pyproject.toml's hashes.
venv_stamp() {
    printf '%s %s\n' "$1" "$(cat requirements/workflow.txt pyproject.toml | cksum)"
}

# Sourced by quick.sh and test.sh: true when .venv holds what setup_venv SPEC installs from
# today's lock file and pyproject.toml, so that a set-up is skipped only when it would change
# nothing. Usage: venv_is_set_up SPEC
venv_is_set_up() {
    [ -x .venv/bin/python ] && [ -f .venv/.pnc-setup ] && [ "$(cat .venv/.pnc-setup)" = "$(venv_stamp "$1")" ]
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
# SPEC is what setup_venv installs (".[workflow]" for the workflows).
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
