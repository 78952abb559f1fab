"""pnc.huge_pages: the GLIBC_TUNABLES value the workflow's jobs inherit, and the process records
that name it."""

from __future__ import annotations

from pnc.huge_pages import enable, tunables
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
