"""Display names of the methods that both studies run, so one method has one name in every table.

The MuJoCo method classes (:mod:`pnc.methods.regression`) and the CIFAR study's method classes
(:mod:`pnc.methods.ood`) read their label here; a method of one study only keeps its label on
its own class.
"""

from __future__ import annotations

from typing import Final

#: method id -> label in tables and figure legends, for the methods of both studies.
SHARED_LABELS: Final[dict[str, str]] = {
    "pnc": "P&C",
    "deep_ensemble": "Deep Ensemble",
    "mc_dropout": "MC Dropout",
    "swag": "SWAG",
}
