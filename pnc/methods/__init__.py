"""Uncertainty methods behind one interface, looked up by id (see :mod:`pnc.methods.contract`).

Every method turns standardised inputs into ``S`` Gaussian predictive samples
(:class:`pnc.Predictive`, ``[S, N, D]``):

============== ======================================= ================ ==================
id             method                                  training run     ``S``
============== ======================================= ================ ==================
pnc            Perturb-and-Correct (Section 3)         ``base``         ``M = 50``
pnc_nocorr     P&C without correction                  ``base``         ``M = 50``
deep_ensemble  Deep Ensemble                           ``deep_ensemble`` ``M = 5``
mc_dropout     MC Dropout                              one per rate     100
swag           SWAG                                    ``base``         100
laplace        KFAC Laplace                            ``base``         100
subspace       Subspace Inference (ESS)                ``subspace``     100
deep_ensemble_ Deep Ensemble, mixture of the members   ``deep_ensemble`` ``M = 5``
mixture        (not ranked; ``deep_ensemble`` draws)
============== ======================================= ================ ==================

Usage::

    method = pnc.methods.get("swag")
    method.config_keys          # ("scale", "rank", "covariance", "n_samples", "chunk_size")
    config = method.make_config({"scale": 0.3})      # clear error on unknown keys / bad values
    method.config_id(config)                         # "scale=0.3"
    run = method.train(method.training_spec(config), x_raw, y_raw,
                       model_config=..., train_config=..., key=...)
    posterior = method.build(run, config, x_std, y_std, key=...)   # a pytree of arrays
    pred = method.predict(posterior, x_test_std, key=...)

``pnc`` and ``pnc_nocorr`` both take :class:`pnc.perturb_correct.PnCConfig` (re-exported here);
``pnc_nocorr`` pins ``correct=False, bootstrap_frac=None`` and accepts ``n_members``, ``rank``,
``sigma`` and ``layers`` only. The shared ``base`` run lives in :mod:`pnc.methods.base_run`.
"""

from __future__ import annotations

import warnings

from pnc.methods.base_run import base_spec, train_base
from pnc.methods.configs import config_id, make_config
from pnc.methods.contract import Method
from pnc.methods.deep_ensemble import DeepEnsemble, DeepEnsembleConfig, DeepEnsembleMixture
from pnc.methods.laplace import Laplace, LaplaceConfig
from pnc.methods.mc_dropout import MCDropout, MCDropoutConfig
from pnc.methods.pnc_method import PerturbAndCorrect, PerturbNoCorrection
from pnc.methods.runs import TrainingRun, TrainingSpec
from pnc.methods.subspace import Subspace as Subspace  # earlier name of SubspaceInference
from pnc.methods.subspace import SubspaceConfig, SubspaceInference
from pnc.methods.swag import SWAG, SWAGConfig
from pnc.perturb_correct import PnCConfig

_REGISTRY: dict[str, Method] = {
    m.id: m
    for m in (
        PerturbAndCorrect(),
        PerturbNoCorrection(),
        DeepEnsemble(),
        MCDropout(),
        SWAG(),
        Laplace(),
        SubspaceInference(),
        DeepEnsembleMixture(),
    )
}

#: The registered method ids.
METHOD_IDS: tuple[str, ...] = tuple(_REGISTRY)

#: The method of the paper and the baseline its cost and its Far metrics are compared with (the
#: report's claims, ``pnc.bench.method_costs``), for code that names them.
PNC_ID: str = PerturbAndCorrect.id
DEEP_ENSEMBLE_ID: str = DeepEnsemble.id
#: The id of Subspace Inference, whose ID RMSE rank a paper claim states.
SUBSPACE_ID: str = SubspaceInference.id


class UnknownMethodError(KeyError, ValueError):
    """An unknown method id (a ``KeyError`` and a ``ValueError``); the message lists the valid ids."""

    def __str__(self) -> str:
        return str(self.args[0])


def get(method_id: str) -> Method:
    """The method registered under ``method_id``.

    Raises:
        UnknownMethodError: (a ``KeyError`` and ``ValueError``) listing :data:`METHOD_IDS`.
    """
    try:
        return _REGISTRY[method_id]
    except (KeyError, TypeError):
        raise UnknownMethodError(
            f"unknown method {method_id!r}; valid ids: {', '.join(METHOD_IDS)}"
        ) from None


def register(method: Method) -> Method:
    """Add ``method`` to the registry under its ``id`` (a new baseline adds one line above
    instead; this is for code outside the package). Returns ``method``.

    Raises:
        ValueError: ``method.id`` is already registered.
    """
    global METHOD_IDS
    if method.id in _REGISTRY:
        raise ValueError(f"method {method.id!r} is already registered")
    _REGISTRY[method.id] = method
    METHOD_IDS = tuple(_REGISTRY)
    return method


def unregister(method_id: str) -> None:
    """Remove the method ``method_id`` added by :func:`register` (unknown ids raise)."""
    global METHOD_IDS
    get(method_id)
    del _REGISTRY[method_id]
    METHOD_IDS = tuple(_REGISTRY)


def registered() -> tuple[Method, ...]:
    """Every registered method, in registration order (:data:`METHOD_IDS`)."""
    return tuple(_REGISTRY.values())


def train_spec(
    spec: TrainingSpec, x, y, *, model_config, train_config, key, validation=None
) -> TrainingRun:
    """Train the run ``spec`` describes on raw data, with the first registered method whose
    ``run_kind`` is ``spec.kind``; ``validation`` (raw ``(x_val, y_val)``) is needed for early
    stopping.

    (The workflow's ``train_run`` stage, :func:`pnc.mujoco.stages.train_run`, calls it and writes
    the run to disk.)"""
    trainers: dict[str, Method] = {}
    for method in _REGISTRY.values():
        trainers.setdefault(method.run_kind, method)
    if spec.kind not in trainers:
        raise ValueError(f"unknown training kind {spec.kind!r}; valid: {', '.join(trainers)}")
    return trainers[spec.kind].train(
        spec,
        x,
        y,
        model_config=model_config,
        train_config=train_config,
        key=key,
        validation=validation,
    )


def train_run(*args, **kwargs) -> TrainingRun:
    """Deprecated name of :func:`train_spec` (same arguments and result)."""
    warnings.warn(
        "pnc.methods.train_run is deprecated; use pnc.methods.train_spec",
        DeprecationWarning,
        stacklevel=2,
    )
    return train_spec(*args, **kwargs)


__all__ = [
    "DEEP_ENSEMBLE_ID",
    "SUBSPACE_ID",
    "METHOD_IDS",
    "PNC_ID",
    "SWAG",
    "DeepEnsemble",
    "DeepEnsembleConfig",
    "DeepEnsembleMixture",
    "Laplace",
    "LaplaceConfig",
    "MCDropout",
    "MCDropoutConfig",
    "Method",
    "PerturbAndCorrect",
    "PerturbNoCorrection",
    "PnCConfig",
    "SWAGConfig",
    "SubspaceConfig",
    "SubspaceInference",
    "TrainingRun",
    "TrainingSpec",
    "UnknownMethodError",
    "base_spec",
    "config_id",
    "get",
    "make_config",
    "register",
    "registered",
    "train_base",
    "train_run",
    "train_spec",
    "unregister",
]
