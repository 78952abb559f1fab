"""Perturb-and-Correct (P&C): post-hoc epistemic ensembles from one trained network."""

from pnc.any_model import Ensemble, ensemble
from pnc.mlp import GaussianMLP, MLPConfig, forward, gaussian_nll, hidden_activations, init_params
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
