"""Perturb-and-Correct (P&C): post-hoc epistemic ensembles from one trained network.

The names below are imported on first use (``pnc.build_members``, ``from pnc import fit``): a
process that only needs a light submodule (``pnc.io``, ``pnc.config_schema``, the workflow's
data and report stages) does not pay for JAX and Flax at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pnc.any_model import Ensemble, ensemble
    from pnc.mlp import (
        GaussianMLP,
        MLPConfig,
        forward,
        gaussian_nll,
        hidden_activations,
        init_params,
    )
    from pnc.perturb_correct import (
        PnCConfig,
        build_members,
        build_members_ridge_path,
        calibration_indices,
        perturbation_basis,
        predict_members,
        ridge_correction,
    )
    from pnc.predictive import Predictive, aleatoric_variance, epistemic_variance, mixture
    from pnc.training import (
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
    "Ensemble": "pnc.any_model",
    "ensemble": "pnc.any_model",
    "GaussianMLP": "pnc.mlp",
    "MLPConfig": "pnc.mlp",
    "forward": "pnc.mlp",
    "gaussian_nll": "pnc.mlp",
    "hidden_activations": "pnc.mlp",
    "init_params": "pnc.mlp",
    "PnCConfig": "pnc.perturb_correct",
    "build_members": "pnc.perturb_correct",
    "build_members_ridge_path": "pnc.perturb_correct",
    "calibration_indices": "pnc.perturb_correct",
    "perturbation_basis": "pnc.perturb_correct",
    "predict_members": "pnc.perturb_correct",
    "ridge_correction": "pnc.perturb_correct",
    "Predictive": "pnc.predictive",
    "aleatoric_variance": "pnc.predictive",
    "epistemic_variance": "pnc.predictive",
    "mixture": "pnc.predictive",
    "Collection": "pnc.training",
    "FitResult": "pnc.training",
    "Observer": "pnc.training",
    "Standardizer": "pnc.training",
    "TrainConfig": "pnc.training",
    "TrainedModel": "pnc.training",
    "fit": "pnc.training",
    "fit_params": "pnc.training",
    "load_model": "pnc.training",
    "save_model": "pnc.training",
    "train": "pnc.training",
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

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
