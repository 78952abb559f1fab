"""The optional parts of the package and the extra that installs each.

``pip install pnc`` installs the library (JAX, Flax, Optax, NumPy); the studies, their report and
the workflows' entry points need the ``[workflow]`` extra. A part that needs an extra calls
:func:`require` when it is imported, so that a missing extra stops it with one line naming the
command that installs it, rather than with an import error from deep inside.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

__all__ = ["MissingExtraError", "missing", "require"]


class MissingExtraError(ModuleNotFoundError):
    """A part of the package was imported without the extra that installs what it needs."""


def missing(modules: Sequence[str]) -> list[str]:
    """The top-level ``modules`` that cannot be imported here (found, not imported)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(extra: str, modules: Sequence[str], part: str) -> None:
    """Stop the import of ``part`` when one of ``modules`` is not installed.

    Raises :class:`MissingExtraError` whose message names the missing modules and the install
    command, ``pip install "pnc[EXTRA]"``. Under ``python -m`` (the package of the module being
    run is still being imported) it prints that one line to stderr and exits with status 2
    instead of a traceback.
    """
    absent = missing(modules)
    if not absent:
        return
    message = (
        f"{part} needs the [{extra}] extra ({', '.join(absent)} not installed): "
        f'pip install "pnc[{extra}]"'
    )
    if sys.argv and sys.argv[0] == "-m":  # `python -m pnc.X` while it locates the module
        print(message, file=sys.stderr)
        raise SystemExit(2)
    raise MissingExtraError(message, name=absent[0])
