"""Display names of the methods that both studies run, so one method has one name in every table.

Each method class declares its ``label``; the classes of a method both studies run, the MuJoCo
one (:mod:`pnc.methods.regression`) and the CIFAR one (:mod:`pnc.methods.ood`), read it from here,
the one module both families may import.
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
