"""pnc.huge_pages: the GLIBC_TUNABLES value the workflow's jobs inherit, and the process records
that name it."""

from __future__ import annotations

import os
import subprocess
import sys

from pnc.huge_pages import SHELL_PREFIX, WITHOUT_VAR, disable, enable, tunables
from pnc.workflow import process_record


def test_huge_pages_tunable_added_once_and_named_in_the_record(monkeypatch):
    """The workflow's jobs inherit GLIBC_TUNABLES with glibc.malloc.hugetlb=1 added to what the
    caller set (a caller's own hugetlb value stays), and each process record names the value."""
    assert tunables(None) == "glibc.malloc.hugetlb=1"
    assert tunables("") == "glibc.malloc.hugetlb=1"
    assert tunables("glibc.malloc.arena_max=2") == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    for own in ("glibc.malloc.hugetlb=0", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"):
        assert tunables(own) == own
    assert tunables(tunables(None)) == "glibc.malloc.hugetlb=1"
    # a tunable whose name only starts like it is another tunable
    assert tunables("glibc.malloc.hugetlbx=0").endswith(":glibc.malloc.hugetlb=1")

    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert enable() == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert process_record("train_run", 0)["malloc_hugetlb"] == "1"
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert process_record("train_run", 0)["malloc_hugetlb"] is None


def _shell_tunables(env: dict[str, str]) -> str:
    """What a job started with :data:`SHELL_PREFIX` sees as ``GLIBC_TUNABLES``."""
    code = 'import os; print(os.environ.get("GLIBC_TUNABLES", "<unset>"))'
    out = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"{SHELL_PREFIX}{sys.executable} -c '{code}'"],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out != "<unset>"  # the prefix always sets it
    return out


def test_jobs_without_huge_pages_get_the_tunable_at_zero_unless_the_caller_set_it(monkeypatch):
    """enable() leaves, for the rules that start with SHELL_PREFIX (the mechanism stage), the
    same tunables with glibc.malloc.hugetlb=0; a caller's own hugetlb value reaches every job, and
    disable() (config huge_pages: false) leaves the caller's environment to every job."""
    monkeypatch.delenv(WITHOUT_VAR, raising=False)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    enable()
    assert os.environ[WITHOUT_VAR] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"
    job_env = {k: os.environ[k] for k in ("GLIBC_TUNABLES", WITHOUT_VAR)}
    assert _shell_tunables(job_env) == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"
    # a second enable() (e.g. a job's own Snakemake parsing the workflow again) keeps the pair
    enable()
    assert os.environ["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert os.environ[WITHOUT_VAR] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"

    monkeypatch.delenv(WITHOUT_VAR)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=2")
    enable()
    assert WITHOUT_VAR not in os.environ
    assert _shell_tunables({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=2"}) == "glibc.malloc.hugetlb=2"

    monkeypatch.setenv(WITHOUT_VAR, "glibc.malloc.hugetlb=0")
    disable()
    assert WITHOUT_VAR not in os.environ
    assert _shell_tunables({}) == ""  # set, empty: no tunable, as when unset
    assert (
        _shell_tunables({"GLIBC_TUNABLES": "glibc.malloc.arena_max=4"})
        == "glibc.malloc.arena_max=4"
    )
