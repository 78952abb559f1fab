"""The memory allocator's settings for the workflow's jobs: glibc's ``GLIBC_TUNABLES``.

XLA's buffers on the CPU are fresh ``malloc`` blocks of megabytes. glibc gives a thread that is not
the main one a block from its own arena, whose heaps hold at most 64 MiB, so a larger block is
mapped afresh (``mmap``) and unmapped when freed, and the kernel maps and zeroes its pages again for
the next one: a large job spent up to 47 % of its CPU time in the kernel (``docs/performance.md``).
The tunables are read when a process starts (glibc 2.35 and later for ``hugetlb``; an older glibc
ignores the ones it does not know). Memory placement does not change any computed value.

Three policies (config ``allocator``):

- ``heap`` (:data:`HEAP`; the MuJoCo study's default): every thread allocates from the main heap
  (``arena_max=1``), which grows instead of mapping (``mmap_max=0``) and keeps what it has
  (``trim_threshold`` 64 GiB), without huge pages (``hugetlb=0``). On an idle machine Humanoid's
  P&C evaluation took a third less CPU time than with ``huge_pages``, at a peak resident memory
  1.2-1.9 GB higher; the quick default's small jobs took the same within run-to-run noise.
- ``huge_pages`` (:data:`HUGE_PAGES`; the CIFAR-10 study's default): transparent huge pages for the
  large blocks (``hugetlb=1``): 5-11 times fewer page faults and 4-10 % less CPU time than
  ``system``.
- ``system``: the caller's ``GLIBC_TUNABLES`` for every job.

A tunable the caller's ``GLIBC_TUNABLES`` already sets keeps the caller's value. Both workflows call
:func:`enable` (or :func:`disable` for ``system``) before starting jobs, which inherit the
variable; each job's process record names the value it started with (:func:`current`). The stages
in :data:`SHORT_LIVED` (the mechanism stage's gigabytes of short-lived buffers, which either policy
cost more than it saved) start their jobs with :data:`SHELL_PREFIX` instead: the caller's
tunables with :data:`SHORT_LIVED_TUNABLES` added, which :func:`enable` leaves in
:data:`SHORT_LIVED_VAR`.
"""

from __future__ import annotations

import os

__all__ = [
    "HEAP",
    "HUGE_PAGES",
    "POLICIES",
    "SHELL_PREFIX",
    "SHORT_LIVED",
    "SHORT_LIVED_TUNABLES",
    "SHORT_LIVED_VAR",
    "current",
    "disable",
    "enable",
    "hugetlb",
    "tunables",
]

HUGETLB = "glibc.malloc.hugetlb"

HEAP: tuple[tuple[str, str], ...] = (
    (HUGETLB, "0"),
    ("glibc.malloc.mmap_max", "0"),
    ("glibc.malloc.arena_max", "1"),
    ("glibc.malloc.trim_threshold", str(64 * 2**30)),
)
"""Policy ``heap``: one growing heap that keeps its memory, without huge pages."""

HUGE_PAGES: tuple[tuple[str, str], ...] = ((HUGETLB, "1"),)
"""Policy ``huge_pages``: the allocator's large blocks on transparent huge pages (``madvise``)."""

POLICIES: dict[str, tuple[tuple[str, str], ...]] = {
    "heap": HEAP,
    "huge_pages": HUGE_PAGES,
    "system": (),
}
"""Config ``allocator``'s values and the tunables each adds to the caller's."""

SHORT_LIVED = frozenset({"mechanism_diagnostics"})
"""The stages (``python -m pnc.workflow STAGE``) whose rules start their jobs with
:data:`SHELL_PREFIX`: in the quick default the mechanism stage took 90 CPU s with huge pages and
111 with :data:`HEAP` against 76 with :data:`SHORT_LIVED_TUNABLES` (``docs/performance.md``)."""

SHORT_LIVED_TUNABLES: tuple[tuple[str, str], ...] = ((HUGETLB, "0"),)
"""What the jobs of :data:`SHORT_LIVED` get added to the caller's tunables: no huge pages."""

SHORT_LIVED_VAR = "PNC_GLIBC_TUNABLES_SHORT_LIVED"
"""The ``GLIBC_TUNABLES`` for the jobs of :data:`SHORT_LIVED`, set by :func:`enable` (unset by
:func:`disable`, so that such jobs keep the caller's value)."""

SHELL_PREFIX = f'GLIBC_TUNABLES="${{{SHORT_LIVED_VAR}-${{GLIBC_TUNABLES-}}}}" '
"""Shell prefix of a job of :data:`SHORT_LIVED`: :data:`SHORT_LIVED_VAR` where set, else the
inherited ``GLIBC_TUNABLES`` (empty where that is unset, which glibc reads the same way). A
constant, so the rule's command does not change with the caller's environment or the config
(which would make Snakemake rerun the job); the rules write it out with their braces doubled."""


def _entries(value: str | None) -> list[str]:
    """The ``name=value`` entries of ``GLIBC_TUNABLES`` ``value``, empty ones dropped."""
    return [e for e in (value or "").split(":") if e]


def _names(value: str | None) -> set[str]:
    return {e.split("=", 1)[0] for e in _entries(value)}


def tunables(caller: str | None, added: tuple[tuple[str, str], ...]) -> str:
    """``GLIBC_TUNABLES`` for a job: ``caller`` with each of ``added`` appended that it lacks.

    Args:
        caller: the caller's ``GLIBC_TUNABLES`` (colon-separated ``name=value``), or None.
        added: ``(name, value)`` pairs, e.g. :data:`HEAP`.

    Returns:
        ``caller``'s entries in their order (a tunable the caller set keeps the caller's value),
        then the pairs of ``added`` whose name ``caller`` does not set; empty entries dropped.
    """
    have = _names(caller)
    return ":".join([*_entries(caller), *(f"{n}={v}" for n, v in added if n not in have)])


def enable(policy: str) -> str:
    """Set this process's ``GLIBC_TUNABLES`` to :func:`tunables` of its value and ``policy``'s
    tunables, so that the processes it starts from now on (the workflow's jobs) use them, and
    :data:`SHORT_LIVED_VAR` to its value with :data:`SHORT_LIVED_TUNABLES`; returns the new value.

    ``policy`` ``"system"`` is :func:`disable`. A :data:`SHORT_LIVED_VAR` already there came from
    an enclosing run's :func:`enable` (a job's own Snakemake on a cluster parses the workflow again,
    and inherits the policy's value as its own) and stays; so does ``GLIBC_TUNABLES``, whose
    tunables are all set by then.

    Raises:
        ValueError: ``policy`` is not one of :data:`POLICIES`.
    """
    if policy not in POLICIES:
        raise ValueError(f"allocator must be one of {sorted(POLICIES)}, got {policy!r}")
    if policy == "system":
        disable()
        return os.environ.get("GLIBC_TUNABLES", "")
    caller = os.environ.get("GLIBC_TUNABLES")
    if SHORT_LIVED_VAR not in os.environ:
        os.environ[SHORT_LIVED_VAR] = tunables(caller, SHORT_LIVED_TUNABLES)
    os.environ["GLIBC_TUNABLES"] = tunables(caller, POLICIES[policy])
    return os.environ["GLIBC_TUNABLES"]


def disable() -> None:
    """Config ``allocator: system``: leave ``GLIBC_TUNABLES`` as the caller set it for every job
    (removes a :data:`SHORT_LIVED_VAR` inherited from an enclosing run)."""
    os.environ.pop(SHORT_LIVED_VAR, None)


def current() -> str | None:
    """This process's ``GLIBC_TUNABLES`` (None where unset), as its process record names it."""
    return os.environ.get("GLIBC_TUNABLES")


def hugetlb() -> str | None:
    """The ``glibc.malloc.hugetlb`` value in this process's ``GLIBC_TUNABLES`` (the last one), or
    None where it sets none."""
    values = [e.split("=", 1)[1] for e in _entries(current()) if e.startswith(HUGETLB + "=")]
    return values[-1] if values else None
