"""Rendering tables as LaTeX (booktabs), Markdown and CSV of the same numbers.

A :class:`Table` holds one table in all three forms; :func:`write_tables` writes
``DIR/{name}.tex``, ``DIR/{name}.md`` and ``DIR/{name}.csv``. The rest formats cells: LaTeX and
Markdown escaping, fixed-point numbers with a chosen minus sign, ``mean ± std`` cells with bold or
italic markup, and the booktabs ``tabular``/``longtable`` and Markdown pipe-table layouts. The
LaTeX needs ``\\usepackage{booktabs,longtable}``.

It imports nothing of the package but :mod:`pnc.runtime.extras` (pandas comes with the
``[workflow]`` extra): the MuJoCo study's tables (:mod:`pnc.report.tables`) and the
CIFAR study's (:mod:`pnc.studies.cifar.ood_tables`: escaping, fixed-point numbers, the bare ``tabular``
of :func:`tabular_lines`, Markdown tables without a caption) are both laid out here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pnc.runtime.extras import require

require("workflow", ("pandas",), "the table engine (pnc.runtime.render)")

import pandas as pd  # noqa: E402

#: The files written per table.
TABLE_FORMATS: tuple[str, ...] = ("tex", "md", "csv")
#: Significance arrows in Markdown and LaTeX.
ARROW = {"up": "↑", "down": "↓"}
LATEX_ARROW = {"up": r"$^{\uparrow}$", "down": r"$^{\downarrow}$"}


@dataclasses.dataclass(frozen=True)
class Table:
    """One rendered table.

    Attributes:
        name: file stem (``DIR/{name}.tex|.md|.csv``).
        caption: plain-text caption (also the LaTeX caption after escaping).
        data: the numbers shown, one row per table row (written as CSV).
        latex: the LaTeX source (booktabs ``tabular`` or ``longtable``).
        markdown: a Markdown pipe table preceded by its caption.
    """

    name: str
    caption: str
    data: pd.DataFrame
    latex: str
    markdown: str


# --------------------------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------------------------


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters in plain text (arrows become math arrows)."""
    out = "".join(_LATEX_SPECIALS.get(ch, ch) for ch in str(text))
    return out.replace("↑", r"$\uparrow$").replace("↓", r"$\downarrow$").replace("±", r"$\pm$")


def md_escape(text: str) -> str:
    """Escape the pipe, the one character that breaks a Markdown table cell."""
    return str(text).replace("|", r"\|")


def decimals_for(value: float, significant: int = 3, lo: int = 3, hi: int = 6) -> int:
    """Decimals that show ``significant`` digits of ``value``, clipped to ``[lo, hi]``."""
    if not math.isfinite(value) or value == 0.0:
        return lo
    return int(np.clip(significant - 1 - math.floor(math.log10(abs(value))), lo, hi))


def fmt(value: float, decimals: int, minus: str = "-") -> str:
    """Fixed-point number; ``minus`` replaces the sign (LaTeX text mode wants ``$-$``)."""
    text = f"{value:.{decimals}f}"
    if text.startswith("-"):
        text = minus + text[1:] if float(text) != 0.0 else text[1:]
    return text


def mean_std_cell(
    mean: float,
    std: float,
    decimals: int,
    *,
    latex: bool,
    bold: bool = False,
    italic: bool = False,
    superscript: str = "",
) -> str:
    """``mean ± std`` (only ``mean`` where ``std`` is NaN) with bold/italic markup."""
    minus = "$-$" if latex else "−"
    text = fmt(mean, decimals, minus)
    if not (isinstance(std, float) and math.isnan(std)) and std is not None:
        text += (r" $\pm$ " if latex else " ± ") + fmt(std, decimals, minus)
    if latex:
        if italic:
            text = rf"\textit{{{text}}}"
        if bold:
            text = rf"\textbf{{{text}}}"
    else:
        if italic and bold:
            text = f"***{text}***"
        elif bold:
            text = f"**{text}**"
        elif italic:
            text = f"*{text}*"
    return text + superscript


def best_mask(values: pd.Series, higher_is_better: bool) -> pd.Series:
    """True where a value equals the best one (all exact ties)."""
    best = values.max() if higher_is_better else values.min()
    return values == best


# --------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------


def tabular_lines(
    colspec: str, header: list[str], rows: list[list[str]], *, indent: str = "", inner: str = ""
) -> list[str]:
    """A booktabs ``tabular`` environment as lines: ``header`` (finished LaTeX header lines) and
    ``rows`` (cells, joined by ``&``) between the rules; ``indent`` before the environment and
    ``indent + inner`` before its contents."""
    pad = indent + inner
    return [
        f"{indent}\\begin{{tabular}}{{{colspec}}}",
        f"{pad}\\toprule",
        *[f"{pad}{h}" for h in header],
        f"{pad}\\midrule",
        *[f"{pad}" + " & ".join(r) + r" \\" for r in rows],
        f"{pad}\\bottomrule",
        f"{indent}\\end{{tabular}}",
    ]


def latex_tabular(
    caption: str,
    label: str,
    colspec: str,
    header: list[str],
    rows: list[list[str]],
    *,
    size: str = r"\small",
) -> str:
    """A floating booktabs ``tabular`` (``header``: finished LaTeX header lines; ``rows``: cells)."""
    return "\n".join(
        [
            r"% requires \usepackage{booktabs}",
            r"\begin{table}[t]",
            r"  \centering",
            f"  {size}",
            f"  \\caption{{{latex_escape(caption)}}}",
            f"  \\label{{{label}}}",
            *tabular_lines(colspec, header, rows, indent="  ", inner="  "),
            r"\end{table}",
            "",
        ]
    )


def latex_longtable(
    caption: str, label: str, colspec: str, header: str, groups: list[tuple[str, list[list[str]]]]
) -> str:
    """A booktabs ``longtable`` of row groups, each under a full-width title row."""
    ncol = len(colspec.replace("@{\\hskip 1.5em}", ""))
    lines = [
        r"% requires \usepackage{booktabs,longtable}",
        r"\begingroup",
        r"\small",
        f"\\begin{{longtable}}{{{colspec}}}",
        f"\\caption{{{latex_escape(caption)}}}",
        f"\\label{{{label}}}\\\\",
        r"\toprule",
        header,
        r"\midrule",
        r"\endfirsthead",
        r"\caption[]{(continued)}\\",
        r"\toprule",
        header,
        r"\midrule",
        r"\endhead",
        r"\midrule",
        f"\\multicolumn{{{ncol}}}{{r}}{{\\emph{{Continued on next page}}}} \\\\",
        r"\endfoot",
        r"\bottomrule",
        r"\endlastfoot",
    ]
    for i, (title, rows) in enumerate(groups):
        if i:
            lines.append(r"\midrule")
        lines.append(f"\\multicolumn{{{ncol}}}{{l}}{{{title}}} \\\\")
        lines += ["    " + " & ".join(r) + r" \\" for r in rows]
    lines += [r"\end{longtable}", r"\endgroup", ""]
    return "\n".join(lines)


def markdown_table(caption: str | None, header: list[str], rows: list[list[str]]) -> str:
    """A Markdown pipe table preceded by ``Table: caption`` (no caption line when ``None``)."""
    lines = [] if caption is None else [f"Table: {md_escape(caption)}", ""]
    lines.append("| " + " | ".join(md_escape(h) for h in header) + " |")
    lines.append("|" + "|".join(["---"] * len(header)) + "|")
    lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def write_tables(tables: Sequence[Table], out_dir: str | Path) -> list[Path]:
    """Write ``{name}.tex``, ``{name}.md`` and ``{name}.csv`` for every table; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in tables:
        for ext, text in (("tex", t.latex), ("md", t.markdown)):
            path = out_dir / f"{t.name}.{ext}"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        path = out_dir / f"{t.name}.csv"
        t.data.to_csv(path, index=False)
        paths.append(path)
    return paths
