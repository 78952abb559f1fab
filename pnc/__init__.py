"""Perturb-and-Correct (P&C): post-hoc epistemic ensembles from one trained network.

The names below are imported on first use (``pnc.build_members``, ``from pnc import fit``): a
process that only needs a light submodule (``pnc.runtime.io``, ``pnc.runtime.config_schema``, the workflow's
data and report stages) does not pay for JAX and Flax at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pnc.core.any_model import Ensemble, ensemble
    from pnc.core.mlp import (
        GaussianMLP,
        MLPConfig,
        forward,
        gaussian_nll,
        hidden_activations,
        init_params,
    )
    from pnc.core.perturb_correct import (
        PnCConfig,
        build_members,
        build_members_ridge_path,
        calibration_indices,
        perturbation_basis,
        predict_members,
        ridge_correction,
    )
    from pnc.core.predictive import Predictive, aleatoric_variance, epistemic_variance, mixture
    from pnc.core.training import (
        Collection,
        FitResult,
        Observer,
        Standardizer,
        TrainConfig,
        TrainedModel,
        fit,
        fit_params,
        load_model,
        save_model,
        train,
    )

#: Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "Ensemble": "pnc.core.any_model",
    "ensemble": "pnc.core.any_model",
    "GaussianMLP": "pnc.core.mlp",
    "MLPConfig": "pnc.core.mlp",
    "forward": "pnc.core.mlp",
    "gaussian_nll": "pnc.core.mlp",
    "hidden_activations": "pnc.core.mlp",
    "init_params": "pnc.core.mlp",
    "PnCConfig": "pnc.core.perturb_correct",
    "build_members": "pnc.core.perturb_correct",
    "build_members_ridge_path": "pnc.core.perturb_correct",
    "calibration_indices": "pnc.core.perturb_correct",
    "perturbation_basis": "pnc.core.perturb_correct",
    "predict_members": "pnc.core.perturb_correct",
    "ridge_correction": "pnc.core.perturb_correct",
    "Predictive": "pnc.core.predictive",
    "aleatoric_variance": "pnc.core.predictive",
    "epistemic_variance": "pnc.core.predictive",
    "mixture": "pnc.core.predictive",
    "Collection": "pnc.core.training",
    "FitResult": "pnc.core.training",
    "Observer": "pnc.core.training",
    "Standardizer": "pnc.core.training",
    "TrainConfig": "pnc.core.training",
    "TrainedModel": "pnc.core.training",
    "fit": "pnc.core.training",
    "fit_params": "pnc.core.training",
    "load_model": "pnc.core.training",
    "save_model": "pnc.core.training",
    "train": "pnc.core.training",
}

__all__ = [
    "Collection",
    "Ensemble",
    "FitResult",
    "GaussianMLP",
    "Observer",
    "MLPConfig",
    "PnCConfig",
    "Predictive",
    "Standardizer",
    "TrainConfig",
    "TrainedModel",
    "aleatoric_variance",
    "build_members",
    "build_members_ridge_path",
    "calibration_indices",
    "ensemble",
    "epistemic_variance",
    "fit",
    "fit_params",
    "forward",
    "gaussian_nll",
    "hidden_activations",
    "init_params",
    "load_model",
    "mixture",
    "perturbation_basis",
    "predict_members",
    "ridge_correction",
    "save_model",
    "train",
]

#: Public subpackages reached as attributes (``pnc.conv.build_members``): name -> module.
_SUBPACKAGES: dict[str, str] = {"conv": "pnc.core.conv"}

__version__ = "0.2.0"


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    if name in _SUBPACKAGES:
        value = importlib.import_module(_SUBPACKAGES[name])
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBPACKAGES))
