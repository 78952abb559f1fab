"""The study's report: statistics, tables and figures of its results (``python -m pnc.report``).

:mod:`~pnc.report.stats` computes (ranks, Wilcoxon-Holm tests), :mod:`~pnc.runtime.render` lays out
tables as LaTeX/Markdown/CSV, :mod:`~pnc.report.tables` builds the paper's tables on both,
:mod:`~pnc.report.figures` draws the figures, and :mod:`pnc.report.__main__` is the command line.
"""

from pnc.runtime.extras import require

require("workflow", ("pandas", "matplotlib"), "the report (pnc.report)")
