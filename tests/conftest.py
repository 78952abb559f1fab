"""Suite-wide set-up: a shared compilation cache, and the files holding the most ``slow`` tests first.

The suite's processes (the parallel workers and the Snakemake jobs of the workflow tests) share one
JAX compilation cache (:mod:`pnc.runtime.compile_cache`) in a temporary directory made for the run and
removed after it, so a function compiled by one test or job is loaded by the others. A
``PNC_COMPILE_CACHE`` set by the caller is used instead (``off`` turns the cache off) and kept, so
a second run loads what the first compiled (``scripts/test.sh`` names one in the user's cache
directory; the fast tier, ``docs/testing.md``); a relative path is made absolute, since tests and
their subprocesses change directory.

``scripts/test.sh`` runs the suite on parallel workers with whole files per worker
(``--dist loadfile``), handing out files in collection order. The workflow runs take minutes each;
started first, they overlap with the many short files instead of running alone at the end. A
module that sets ``RUN_FIRST = True`` (the tiny MuJoCo and CIFAR-10 runs) goes before all others.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter

import pytest

from pnc.runtime import compile_cache

_MADE_CACHE: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    # the controller (or a serial run) makes the directory; workers inherit the variable
    if not hasattr(config, "workerinput"):
        given = os.environ.get(compile_cache.ENV_VAR)
        if given is None:
            path = tempfile.mkdtemp(prefix="pnc-test-jax-cache-")
            _MADE_CACHE.append(path)
            os.environ[compile_cache.ENV_VAR] = path
        elif given.strip().lower() not in compile_cache.OFF_VALUES:
            os.environ[compile_cache.ENV_VAR] = os.path.abspath(given)
    compile_cache.enable_from_env()


def pytest_unconfigure(config: pytest.Config) -> None:
    for path in _MADE_CACHE:
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow_tests = Counter(item.path for item in items if item.get_closest_marker("slow") is not None)
    # the files that declare RUN_FIRST (the longest chains of workflow runs), then the file with
    # the most slow tests first; a stable sort keeps every other order
    first = {item.path for item in items if getattr(item.module, "RUN_FIRST", False)}
    items.sort(key=lambda item: (item.path not in first, -slow_tests[item.path]))
