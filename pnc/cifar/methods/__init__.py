"""The CIFAR study's post-hoc methods, looked up by id: one class per method (the contract is
:class:`pnc.cifar.posthoc.PosthocMethod`), one line each in the registry below, in Table 2's order
(then the extra single-model scores). The workflow's config checks, its post-hoc jobs and the
tables read the methods, their configs, the training runs they read and their labels from here.

=============== ============== ================================ ==========================
id              label          module                           training runs
=============== ============== ================================ ==========================
mahalanobis     Mahalanobis    ``single_model_detectors``       ``base``
react_energy    ReAct+Energy   ``single_model_detectors``       ``base``
llla            LLLA           ``llla_detector``                ``base``
epinet          Epinet         ``epinet_detector``              ``base``
swag            SWAG           ``swag_detector``                ``base`` (its moments)
pnc             P&C            ``pnc_detector``                 ``base``
deep_ensemble   Deep Ensemble  ``deep_ensemble_detector``       ``base``, ``member<k>``
mc_dropout      MC Dropout     ``mc_dropout_detector``          ``dropout<rate>`` per rate
msp             MSP            ``single_model_detectors``       ``base``
energy          Energy         ``single_model_detectors``       ``base``
=============== ============== ================================ ==========================

Code outside the package (a test, a notebook) adds a method with :func:`register`.
"""

from __future__ import annotations

from collections.abc import Mapping

from pnc.cifar.methods.deep_ensemble_detector import DeepEnsembleDetector
from pnc.cifar.methods.epinet_detector import EpinetDetector
from pnc.cifar.methods.llla_detector import LLLADetector
from pnc.cifar.methods.mc_dropout_detector import MCDropoutDetector
from pnc.cifar.methods.pnc_detector import PnCDetector
from pnc.cifar.methods.single_model_detectors import (
    EnergyDetector,
    MahalanobisDetector,
    MSPDetector,
    ReActEnergyDetector,
)
from pnc.cifar.methods.swag_detector import SWAGDetector
from pnc.cifar.posthoc import Context, MethodSection, PosthocMethod, Runs

_REGISTRY: dict[str, PosthocMethod] = {
    m.id: m
    for m in (
        MahalanobisDetector(),
        ReActEnergyDetector(),
        LLLADetector(),
        EpinetDetector(),
        SWAGDetector(),
        PnCDetector(),
        DeepEnsembleDetector(),
        MCDropoutDetector(),
        MSPDetector(),
        EnergyDetector(),
    )
}

#: The registered method ids, in the tables' order.
METHOD_IDS: tuple[str, ...] = tuple(_REGISTRY)


def get(method: str) -> PosthocMethod:
    """The method registered under ``method``.

    Raises:
        ValueError: an unknown id (the message lists the valid ones).
    """
    try:
        return _REGISTRY[method]
    except (KeyError, TypeError):
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHOD_IDS)}") from None


def register(method: PosthocMethod) -> PosthocMethod:
    """Add ``method`` under its id, after the registered ones (a new method of the package adds
    one line above instead). Returns ``method``.

    Raises:
        ValueError: the id is already registered.
        TypeError: ``method`` is not a :class:`pnc.cifar.posthoc.PosthocMethod`.
    """
    global METHOD_IDS
    if not isinstance(method, PosthocMethod):
        raise TypeError(f"{method!r} is not a CIFAR method (pnc.cifar.posthoc.PosthocMethod)")
    if method.id in _REGISTRY:
        raise ValueError(f"method {method.id!r} is already registered")
    _REGISTRY[method.id] = method
    METHOD_IDS = tuple(_REGISTRY)
    return method


def unregister(method: str) -> None:
    """Remove the method ``method`` added by :func:`register` (unknown ids raise)."""
    global METHOD_IDS
    get(method)
    del _REGISTRY[method]
    METHOD_IDS = tuple(_REGISTRY)


def registered() -> tuple[PosthocMethod, ...]:
    """Every registered method, in the tables' order (:data:`METHOD_IDS`)."""
    return tuple(_REGISTRY.values())


def labels() -> dict[str, str]:
    """Method id -> label in the tables, in the tables' order (read when called, so a method
    registered later is included)."""
    return {m.id: m.label for m in _REGISTRY.values()}


def method_config(method: str, section: Mapping | None) -> MethodSection:
    """The config of ``method`` from its section (defaults filled in; unknown keys raise)."""
    return get(method).config(section)


def run_method(method: str, section: Mapping, ctx: Context, runs: Runs) -> tuple[dict, dict]:
    """``(outputs, record)`` of ``method`` on ``ctx`` from its training ``runs`` (run id -> run)."""
    spec = get(method)
    return spec.run(spec.config(section), ctx, runs)


def runs_of(method: str, section: Mapping) -> list[str]:
    """The training runs (ids) ``method`` reads."""
    spec = get(method)
    return spec.runs_of(spec.config(section))


__all__ = [
    "METHOD_IDS",
    "DeepEnsembleDetector",
    "EnergyDetector",
    "EpinetDetector",
    "LLLADetector",
    "MCDropoutDetector",
    "MSPDetector",
    "MahalanobisDetector",
    "PnCDetector",
    "ReActEnergyDetector",
    "SWAGDetector",
    "get",
    "labels",
    "method_config",
    "register",
    "registered",
    "run_method",
    "runs_of",
    "unregister",
]
