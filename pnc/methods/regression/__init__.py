"""The regression family: the MuJoCo study's uncertainty methods, looked up by id (the contract is
:class:`pnc.methods.regression.contract.MethodBase`, on :class:`pnc.methods.base.BaseMethod`).

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

    method = pnc.methods.regression.get("swag")
    method.config_keys          # ("scale", "rank", "covariance", "n_samples", "chunk_size")
    config = method.make_config({"scale": 0.3})      # clear error on unknown keys / bad values
    method.config_id(config)                         # "scale=0.3"
    run = method.train(method.training_spec(config), x_raw, y_raw,
                       model_config=..., train_config=..., key=...)
    posterior = method.build(run, config, x_std, y_std, key=...)   # a pytree of arrays
    pred = method.predict(posterior, x_test_std, key=...)

``pnc`` and ``pnc_nocorr`` both take :class:`pnc.core.perturb_correct.PnCConfig` (re-exported here);
``pnc_nocorr`` pins ``correct=False, bootstrap_frac=None`` and accepts ``n_members``, ``rank``,
``sigma`` and ``layers`` only. The shared ``base`` run lives in
:mod:`pnc.methods.regression.base_run`.
"""

from __future__ import annotations

from pnc.core.perturb_correct import PnCConfig
from pnc.methods.configs import config_id, make_config
from pnc.methods.registry import Registry, UnknownMethodError
from pnc.methods.regression.base_run import base_spec, train_base
from pnc.methods.regression.contract import MethodBase
from pnc.methods.regression.deep_ensemble import (
    DeepEnsemble,
    DeepEnsembleConfig,
    DeepEnsembleMixture,
)
from pnc.methods.regression.laplace import Laplace, LaplaceConfig
from pnc.methods.regression.mc_dropout import MCDropout, MCDropoutConfig
from pnc.methods.regression.pnc_method import PerturbAndCorrect, PerturbNoCorrection
from pnc.methods.regression.runs import TrainingRun, TrainingSpec
from pnc.methods.regression.subspace import SubspaceConfig, SubspaceInference
from pnc.methods.regression.swag import SWAG, SWAGConfig

#: The registry of the regression family, in the tables' order (a new baseline adds one line).
REGISTRY: Registry[MethodBase] = Registry(
    "regression",
    MethodBase,
    (
        PerturbAndCorrect(),
        PerturbNoCorrection(),
        DeepEnsemble(),
        MCDropout(),
        SWAG(),
        Laplace(),
        SubspaceInference(),
        DeepEnsembleMixture(),
    ),
)

get, register, unregister = REGISTRY.get, REGISTRY.register, REGISTRY.unregister
registered = REGISTRY.registered
__getattr__ = REGISTRY.module_getattr(__name__)  # METHOD_IDS, read when asked

#: The method of the paper and the baseline its cost and its Far metrics are compared with (the
#: report's claims, ``bench.method_costs``), for code that names them.
PNC_ID: str = PerturbAndCorrect.id
DEEP_ENSEMBLE_ID: str = DeepEnsemble.id
#: The id of Subspace Inference, whose ID RMSE rank a paper claim states.
SUBSPACE_ID: str = SubspaceInference.id


def train_spec(
    spec: TrainingSpec, x, y, *, model_config, train_config, key, validation=None
) -> TrainingRun:
    """Train the run ``spec`` describes on raw data, with the first registered method whose
    ``run_kind`` is ``spec.kind``; ``validation`` (raw ``(x_val, y_val)``) is needed for early
    stopping.

    (The workflow's ``train_run`` stage, :func:`pnc.studies.mujoco.stages.train_run`, calls it and writes
    the run to disk.)"""
    trainers: dict[str, MethodBase] = {}
    for method in REGISTRY.registered():
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


__all__ = [
    "DEEP_ENSEMBLE_ID",
    "METHOD_IDS",
    "PNC_ID",
    "REGISTRY",
    "SUBSPACE_ID",
    "SWAG",
    "DeepEnsemble",
    "DeepEnsembleConfig",
    "DeepEnsembleMixture",
    "Laplace",
    "LaplaceConfig",
    "MCDropout",
    "MCDropoutConfig",
    "MethodBase",
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
    "train_spec",
    "unregister",
]
