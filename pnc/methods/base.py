"""Re-exports, for imports written before the split: the names that used to live here.

This module defines nothing. The method contract, run records, configurations and the shared
prediction helpers each have a module of their own, and the library imports them from there:

- :mod:`pnc.methods.contract`: :class:`Method`, :class:`MethodBase`, :data:`STYLE_KEYS`;
- :mod:`pnc.methods.runs`: :class:`TrainingSpec`, :class:`TrainingRun`;
- :mod:`pnc.methods.configs`: :func:`make_config`, :func:`config_id`, :func:`check_positive`,
  :func:`check_choice`, :func:`check_max_rows`;
- :mod:`pnc.methods.sampling`: :data:`PREDICTIVE_RULES`, :func:`apply_predictive_rule`,
  :func:`standardise`, :func:`check_inputs`, :func:`sample_predictive`.

``from pnc.methods.base import MethodBase`` (and the other names above) keeps working; new code
imports from the modules above.
"""

from __future__ import annotations

from pnc.methods.configs import (
    check_choice,
    check_max_rows,
    check_positive,
    config_id,
    make_config,
)
from pnc.methods.contract import STYLE_KEYS, Array, Method, MethodBase
from pnc.methods.runs import TrainingRun, TrainingSpec
from pnc.methods.sampling import (
    PREDICTIVE_RULES,
    apply_predictive_rule,
    check_inputs,
    sample_predictive,
    standardise,
)

__all__ = [
    "PREDICTIVE_RULES",
    "STYLE_KEYS",
    "Array",
    "Method",
    "MethodBase",
    "TrainingRun",
    "TrainingSpec",
    "apply_predictive_rule",
    "check_choice",
    "check_inputs",
    "check_max_rows",
    "check_positive",
    "config_id",
    "make_config",
    "sample_predictive",
    "standardise",
]
