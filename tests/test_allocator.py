"""pnc.runtime.allocator: the GLIBC_TUNABLES value the workflow's jobs inherit under each policy, what
the short-lived stages get instead, and the process records that name them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pnc.runtime.allocator import (
    HEAP,
    SHELL_PREFIX,
    SHORT_LIVED_VAR,
    current,
    disable,
    enable,
    hugetlb,
    tunables,
)
from pnc.runtime.stage import process_record

HEAP_VALUE = (
    "glibc.malloc.hugetlb=0:glibc.malloc.mmap_max=0:glibc.malloc.arena_max=1"
    ":glibc.malloc.trim_threshold=68719476736"
)


@pytest.fixture(autouse=True)
def _restored_environment(monkeypatch):
    """Both variables restored after each test, also where it starts without them (monkeypatch
    records a variable's absence only when it set or removed one that was there)."""
    for name in ("GLIBC_TUNABLES", SHORT_LIVED_VAR):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def test_tunables_add_what_the_caller_did_not_set():
    assert tunables(None, HEAP) == HEAP_VALUE
    assert tunables("", HEAP) == HEAP_VALUE
    assert tunables(HEAP_VALUE, HEAP) == HEAP_VALUE  # idempotent
    # the caller's own values stay, in the caller's order; only missing names are appended
    assert tunables("glibc.malloc.arena_max=4::glibc.malloc.hugetlb=1", HEAP) == (
        "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0"
        ":glibc.malloc.trim_threshold=68719476736"
    )
    # a tunable whose name only starts like another one is another tunable
    assert tunables("glibc.malloc.hugetlbx=0", (("glibc.malloc.hugetlb", "1"),)) == (
        "glibc.malloc.hugetlbx=0:glibc.malloc.hugetlb=1"
    )
    assert tunables("glibc.malloc.arena_max=2", ()) == "glibc.malloc.arena_max=2"


def test_enable_sets_the_policy_and_the_record_names_it(monkeypatch):
    assert process_record("train_run", 0)["glibc_tunables"] is None
    assert process_record("train_run", 0)["malloc_hugetlb"] is None
    assert enable("heap") == HEAP_VALUE
    record = process_record("train_run", 0)
    assert record["glibc_tunables"] == HEAP_VALUE and record["malloc_hugetlb"] == "0"

    monkeypatch.delenv(SHORT_LIVED_VAR)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    assert enable("huge_pages") == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    assert current() == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1" and hugetlb() == "1"
    with pytest.raises(ValueError, match="allocator must be one of"):
        enable("huge")


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


def _job_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ("GLIBC_TUNABLES", SHORT_LIVED_VAR) if k in os.environ}


@pytest.mark.parametrize("policy", ["heap", "huge_pages"])
def test_short_lived_jobs_get_the_callers_tunables_without_huge_pages(monkeypatch, policy):
    """Whatever the policy, the stages that start with SHELL_PREFIX (the mechanism stage) get the
    caller's tunables with glibc.malloc.hugetlb=0 added, nothing of the policy's; a caller's own
    hugetlb value reaches them unchanged; a second enable() (a job's own Snakemake on a cluster
    parsing the workflow again, with the policy's value inherited) changes neither variable."""
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")
    first = enable(policy)
    assert first != "glibc.malloc.arena_max=2"
    assert _shell_tunables(_job_env()) == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"
    assert enable(policy) == first
    assert os.environ[SHORT_LIVED_VAR] == "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=0"

    monkeypatch.delenv(SHORT_LIVED_VAR)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=2")
    enable(policy)
    assert hugetlb() == "2"
    assert _shell_tunables(_job_env()) == "glibc.malloc.hugetlb=2"


def test_system_leaves_the_callers_environment_to_every_job(monkeypatch):
    monkeypatch.setenv(SHORT_LIVED_VAR, "glibc.malloc.hugetlb=0")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=4")
    assert enable("system") == "glibc.malloc.arena_max=4"
    assert SHORT_LIVED_VAR not in os.environ
    assert _shell_tunables(_job_env()) == "glibc.malloc.arena_max=4"
    monkeypatch.delenv("GLIBC_TUNABLES")
    disable()
    assert _shell_tunables({}) == ""  # set, empty: no tunable, as when unset
