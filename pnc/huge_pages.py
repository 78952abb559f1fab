"""Transparent huge pages for the workflow's jobs: glibc's ``glibc.malloc.hugetlb`` tunable.

XLA's buffers on the CPU are fresh ``malloc`` blocks of megabytes that the kernel maps one 4 KiB
page at a time. With ``glibc.malloc.hugetlb=1`` in ``GLIBC_TUNABLES`` (read when a process starts;
glibc 2.35 and later) the allocator asks for 2 MiB transparent huge pages (``madvise``), and a
workflow job took 5-11 times fewer page faults and 4-10 % less CPU time (``docs/performance.md``).
Where glibc is older, or transparent huge pages are off
(``/sys/kernel/mm/transparent_hugepage/enabled``: ``never``), the tunable changes nothing. Memory
placement does not change any computed value.

Both workflows call :func:`enable` (config ``huge_pages``, default true) before starting jobs,
which inherit the variable; each job's process record names the value it started with
(:func:`requested`). Where huge pages cost a stage more than they save (the mechanism stage's
gigabytes of short-lived buffers), its rule starts the job with :data:`WITHOUT_VAR`'s value
instead (:data:`SHELL_PREFIX`), which :func:`enable` sets to the same tunables with
``glibc.malloc.hugetlb=0``; a caller's own ``glibc.malloc.hugetlb`` is kept there too.
"""

from __future__ import annotations

import os

__all__ = [
    "SHELL_PREFIX",
    "TUNABLE",
    "WITHOUT",
    "WITHOUT_VAR",
    "disable",
    "enable",
    "requested",
    "tunables",
]

TUNABLE = "glibc.malloc.hugetlb"
"""glibc's tunable that backs the allocator's large blocks with transparent huge pages."""

WITHOUT_VAR = "PNC_GLIBC_TUNABLES_WITHOUT_HUGE_PAGES"
"""The ``GLIBC_TUNABLES`` for jobs that run without huge pages, set by :func:`enable` only when it
added :data:`TUNABLE` itself (unset otherwise, so that such jobs keep the caller's value)."""

WITHOUT = frozenset({"mechanism_diagnostics"})
"""The stages (``python -m pnc.workflow STAGE``) whose rules start their jobs with
:data:`SHELL_PREFIX`: the mechanism stage's gigabytes of short-lived buffers took 16 s of system
time with huge pages against 4 s without (``docs/performance.md``)."""

SHELL_PREFIX = f'GLIBC_TUNABLES="${{{WITHOUT_VAR}-${{GLIBC_TUNABLES-}}}}" '
"""Shell prefix of a job that runs without huge pages: :data:`WITHOUT_VAR` where set, else the
inherited ``GLIBC_TUNABLES`` (empty where that is unset, which glibc reads the same way). A
constant, so the rule's command does not change with the caller's environment or the config
(which would make Snakemake rerun the job); the rules write it out with their braces doubled."""


def _value(tunables: str | None) -> str | None:
    """The value ``tunables`` (``GLIBC_TUNABLES``) gives :data:`TUNABLE` (the last one), or None."""
    values = [
        e.split("=", 1)[1] for e in (tunables or "").split(":") if e.startswith(TUNABLE + "=")
    ]
    return values[-1] if values else None


def tunables(current: str | None) -> str:
    """``GLIBC_TUNABLES`` for the workflow's jobs: ``current`` with ``glibc.malloc.hugetlb=1`` added.

    Args:
        current: the caller's ``GLIBC_TUNABLES`` (colon-separated ``name=value``), or None.

    Returns:
        ``current`` unchanged when it already sets ``glibc.malloc.hugetlb`` (the caller's choice
        stays), else ``current`` with ``glibc.malloc.hugetlb=1`` appended.
    """
    if _value(current) is not None:
        return current or ""
    return _appended(current, "1")


def _appended(current: str | None, value: str) -> str:
    """``current`` (``GLIBC_TUNABLES``, which does not set :data:`TUNABLE`) with ``TUNABLE=value``
    appended, empty entries dropped."""
    return ":".join([*(e for e in (current or "").split(":") if e), f"{TUNABLE}={value}"])


def enable() -> str:
    """Set this process's ``GLIBC_TUNABLES`` to :func:`tunables` of its value, so that the processes
    it starts from now on (the workflow's jobs) use huge pages; returns the new value.

    When it adds :data:`TUNABLE`, :data:`WITHOUT_VAR` gets the same tunables with
    ``glibc.malloc.hugetlb=0`` (for :data:`SHELL_PREFIX`); when the caller had set it, the caller's
    value is left to every job. A :data:`WITHOUT_VAR` already there came from an enclosing run's
    :func:`enable` (a job's own Snakemake on a cluster parses the workflow again) and stays.
    """
    current = os.environ.get("GLIBC_TUNABLES")
    if _value(current) is None:
        os.environ[WITHOUT_VAR] = _appended(current, "0")
    os.environ["GLIBC_TUNABLES"] = tunables(current)
    return os.environ["GLIBC_TUNABLES"]


def disable() -> None:
    """Config ``huge_pages: false``: leave ``GLIBC_TUNABLES`` as the caller set it for every job
    (removes a :data:`WITHOUT_VAR` inherited from an enclosing run)."""
    os.environ.pop(WITHOUT_VAR, None)


def requested() -> str | None:
    """The ``glibc.malloc.hugetlb`` value in this process's ``GLIBC_TUNABLES``, or None."""
    return _value(os.environ.get("GLIBC_TUNABLES"))
