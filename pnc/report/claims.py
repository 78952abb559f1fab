"""The paper's claims measured on a reference folder, each with its verdict: the ranking claims
(:mod:`pnc.report.ranking_claims`) and the mechanism claims (:mod:`pnc.report.mechanism_claims`),
in the vocabulary of :mod:`pnc.report.verdicts`; :func:`claims_of_folder` and the Markdown table
that :func:`pnc.report.compare.comparison_text` ends a ``comparison.md`` with.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from pnc.report.mechanism_claims import MECHANISM_CLAIMS, mechanism_claim, mechanism_of_folder
from pnc.report.ranking_claims import RANKING_CLAIMS, ranking_claim
from pnc.report.table1 import Column, our_readings
from pnc.report.verdicts import Claim
from pnc.runtime.render import markdown_table
from pnc.studies.mujoco.results_table import load

#: How the verdicts are decided (printed above the table).
RULE = (
    'Each verdict follows the rule stated beside it (column "Rule, per environment", from '
    "`pnc/report/claims.py`), with the count of environments where the rule's per-environment "
    "reading holds. A ranking claim is judged on the mean ranks, the wins or the Wilcoxon-Holm "
    "test over the environments' seed means, in each reading of the Deep Ensemble present "
    "(draws, mixture), so it can hold while P&C is not best in every environment: the count says "
    "in how many it is. A mechanism claim (`tables/mechanism.csv`) is judged per environment, and "
    "an environment holds it only when every seed does (3A too: on each seed's Far NLL at the "
    "configurations chosen per sigma on the seed means; its reading on the seed means stands "
    'beside it, labelled); a composite claim is judged in its parts. A verdict is "holds" '
    'when its rule holds in every reading (ranking) or every environment (mechanism), "does not '
    'hold" when in none, else "partly" with the readings or the environments named (the '
    'shorter list: where it holds, or "not" where it fails); "cannot be compared" marks a '
    "missing input."
)


# --------------------------------------------------------------------------------------------
# All claims
# --------------------------------------------------------------------------------------------


def claims_of(
    draws: Column, mixture: Column | None = None, mechanism: pd.DataFrame | None = None
) -> list[Claim]:
    """Every claim: the ranking claims on the Table 1 cells of the draws and mixture readings
    (:func:`pnc.report.table1.our_readings`), the mechanism claims on the mechanism table."""
    return [ranking_claim(c, judge, draws, mixture) for c, judge in RANKING_CLAIMS] + [
        mechanism_claim(c, judge, mechanism) for c, judge in MECHANISM_CLAIMS
    ]


def claims_of_folder(folder: str | Path) -> list[Claim]:
    """Every claim measured on a reference folder (``results.csv``, ``tables/mechanism.csv``)."""
    draws, mixture = our_readings(load(Path(folder) / "results.csv"))
    return claims_of(draws, mixture, mechanism_of_folder(folder))


def claims_markdown(claims: Sequence[Claim]) -> str:
    """The claims as a Markdown pipe table (:func:`pnc.runtime.render.markdown_table`)."""
    rows = [[c.claim, c.measured, c.rule or "-", c.verdict] for c in claims]
    return markdown_table(None, ["Claim", "Measured", "Rule, per environment", "Verdict"], rows)
