"""What the benchmarks' command lines share: a parser whose size options are integers with
defaults (:func:`bench_parser`), and the JSON report printed on stdout and, with ``--out``, also
written to a file (:func:`emit`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def bench_parser(doc: str, *, out: bool = False, **sizes: int | None) -> argparse.ArgumentParser:
    """A parser described by the first line of ``doc`` (a module's docstring).

    Args:
        doc: the text whose first line describes the command.
        out: add ``--out FILE`` (a :class:`~pathlib.Path`, default ``None``) after the sizes.
        sizes: one integer option per keyword, in order: ``cal_rows=50_000`` gives
            ``--cal-rows`` with default 50,000.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    for name, default in sizes.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    if out:
        parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    return parser


def emit(report: Any, out: str | Path | None = None, *, sort_keys: bool = False) -> Any:
    """Print ``report`` as JSON (indent 2) and, with ``out``, write the same text there (plus a
    final newline; its folder made first). Returns ``report``."""
    text = json.dumps(report, indent=2, sort_keys=sort_keys)
    print(text)
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    return report
