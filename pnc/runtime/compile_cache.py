"""JAX's persistent compilation cache, shared by every job of a study.

Every Snakemake job is a new Python process that would otherwise compile each of its jitted
functions again. With the cache on, the first job to compile a function writes the executable to
disk and every later job (of any rule, in any process) loads it instead of compiling.

The study's cache lives in ``resources/jax_cache/`` (:data:`DEFAULT_DIR`, relative to the study's
working directory). The workflow sets :data:`ENV_VAR` from the config key ``compile_cache`` (a
directory, or ``false`` to turn the cache off) unless it is already set, and every job's start-up
(:func:`pnc.runtime.stage.limit_threads`) calls :func:`enable_from_env`. ``PNC_COMPILE_CACHE=off``
turns it off for one run whatever the config says.

Safety:

- **Results.** A cached executable is the one XLA compiled for the same program, JAX/jaxlib
  version, backend and ``XLA_FLAGS`` (all part of JAX's cache key), so a cache hit computes the same
  bits as a fresh compilation.
- **Machines.** JAX's key does not name the host CPU's instruction set, so an executable compiled on
  one node of a cluster could use instructions another node lacks. Entries therefore go to a
  sub-directory per CPU (:func:`host_tag`: architecture, model and instruction-set flags), and nodes
  of different kinds sharing one filesystem never read each other's entries.
- **Faults.** A foreign, corrupt or truncated entry fails JAX's decompression check; JAX then warns
  and compiles the function as if there were no cache (``jax_raise_persistent_cache_errors`` is
  left off). A directory that cannot be created or written is reported with one warning and the job
  runs without the cache. Concurrent jobs may read an entry another job is still writing: that
  read fails the same check and the reader compiles; the finished entry serves later jobs.
- Deleting the directory is always safe (the next jobs compile and fill it again).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import tempfile
import warnings
from pathlib import Path

__all__ = [
    "DEFAULT_DIR",
    "ENV_VAR",
    "OFF_VALUES",
    "cpu_name",
    "disable",
    "enable",
    "enable_from_env",
    "host_tag",
]

DEFAULT_DIR = "resources/jax_cache"
"""The study's cache directory, relative to its working directory."""

ENV_VAR = "PNC_COMPILE_CACHE"
"""Environment variable naming the cache directory; one of :data:`OFF_VALUES` turns it off."""

OFF_VALUES = frozenset({"", "0", "off", "false", "no", "none"})
"""Values of :data:`ENV_VAR` (case-insensitive) that turn the cache off."""

# cache every compiled function: the study's functions take 0.05-2 s each to compile and a job
# compiles dozens; JAX's default (>= 1 s only) would skip most of them
_SETTINGS = {
    "jax_compilation_cache_dir": None,  # the directory, set by enable()
    "jax_persistent_cache_min_compile_time_secs": 0.0,
    "jax_persistent_cache_min_entry_size_bytes": -1,
}


def _cpuinfo(keys: tuple[str, ...]) -> list[str] | None:
    """The stripped lines of ``/proc/cpuinfo`` whose key is one of ``keys``, up to the end of the
    first processor block that has any (the first processor describes them all); None where that
    file cannot be read."""
    lines: list[str] = []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() in keys:
                    lines.append(line.strip())
                if not line.strip() and lines:
                    break
    except OSError:
        return None
    return lines


def host_tag() -> str:
    """Name of this host's CPU kind: ``<arch>-<12 hex digits>``.

    The digits hash the CPU model name and its instruction-set flags from ``/proc/cpuinfo`` (the
    architecture and processor string where that file is missing), so two machines get the same tag
    only when code compiled on one runs on the other.
    """
    lines = _cpuinfo(("model name", "flags", "Features", "CPU implementer", "CPU part"))
    if lines is None:
        lines = [platform.processor()]
    digest = hashlib.sha256("\n".join([platform.machine(), *lines]).encode()).hexdigest()
    return f"{platform.machine() or 'unknown'}-{digest[:12]}"


def cpu_name() -> str:
    """This host's CPU model name (``model name`` in ``/proc/cpuinfo``; the processor string, else
    the architecture, where that file does not name it), e.g. for a record of where a result was
    made beside :func:`host_tag`."""
    for line in _cpuinfo(("model name",)) or []:
        value = line.split(":", 1)[1].strip()
        if value:
            return value
    return platform.processor() or platform.machine() or "unknown"


def _writable_dir(path: Path) -> str | None:
    """Create ``path`` and write a probe file in it; None if that works, else the reason."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"{type(err).__name__}: {err}"
    return None


def enable(path: str | os.PathLike[str]) -> Path | None:
    """Turn on JAX's persistent compilation cache in ``path/<host_tag()>``.

    Call it before the first JAX computation of the process (importing JAX first is fine). When JAX
    has not been imported yet, the settings go into the ``JAX_*`` environment variables that JAX
    reads when it is imported (so this costs no JAX import); otherwise into ``jax.config``.

    Args:
        path: the cache directory shared by the study's jobs (created if missing).

    Returns:
        The directory the entries go to, or None (with a :class:`RuntimeWarning`) when it cannot
        be created or written; the process then runs without the cache, computing the same results.
    """
    directory = Path(path).expanduser().absolute() / host_tag()
    problem = _writable_dir(directory)
    if problem is not None:
        warnings.warn(
            f"JAX compilation cache off: cannot write to {directory} ({problem}); every function"
            f" is compiled (set {ENV_VAR}=off or the config key compile_cache: false to silence)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    settings = {**_SETTINGS, "jax_compilation_cache_dir": str(directory)}
    if "jax" in sys.modules:
        import jax

        for name, value in settings.items():
            jax.config.update(name, value)
    else:
        for name, value in settings.items():
            os.environ[name.upper()] = str(value)
    return directory


def disable() -> None:
    """Turn JAX's persistent compilation cache off for this process and the processes it starts.

    Undoes :func:`enable` here and what a parent's :func:`enable` passed down in the ``JAX_*``
    environment variables (the cache directory and thresholds it sets): they are removed from the
    environment and, when JAX is imported, the cache directory is unset in ``jax.config``. Call it
    before the first JAX computation, as :func:`enable`.
    """
    for name in _SETTINGS:
        os.environ.pop(name.upper(), None)
    if "jax" in sys.modules:
        import jax

        jax.config.update("jax_compilation_cache_dir", None)


def enable_from_env(default: str | os.PathLike[str] | None = None) -> Path | None:
    """:func:`enable` with the directory named by :data:`ENV_VAR`, else ``default``.

    Returns None without enabling anything when the variable is unset and ``default`` is None.
    When it is one of :data:`OFF_VALUES` it also turns off a cache that this process or its parent
    turned on (:func:`disable`) and returns None.
    """
    value = os.environ.get(ENV_VAR)
    if value is None:
        return None if default is None else enable(default)
    if value.strip().lower() in OFF_VALUES:
        disable()
        return None
    return enable(value)
