"""The OOD family: the CIFAR study's post-hoc methods, looked up by id; one class per method (the
contract is :class:`pnc.methods.ood.posthoc.PosthocMethod`, on
:class:`pnc.methods.base.BaseMethod`), one line each in the registry below, in Table 2's order
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

from collections.abc import Iterable, Mapping, Sequence

from pnc.core.classifier.recipe import Recipe
from pnc.methods.entry import split_entry
from pnc.methods.ood.deep_ensemble_detector import DeepEnsembleDetector
from pnc.methods.ood.epinet_detector import EpinetDetector
from pnc.methods.ood.llla_detector import LLLADetector
from pnc.methods.ood.mc_dropout_detector import MCDropoutDetector
from pnc.methods.ood.pnc_detector import PnCDetector
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs
from pnc.methods.ood.single_model_detectors import (
    EnergyDetector,
    MahalanobisDetector,
    MSPDetector,
    ReActEnergyDetector,
)
from pnc.methods.ood.swag_detector import SWAGDetector
from pnc.methods.ood.training_runs import RunKind, parse_run
from pnc.methods.registry import Registry

#: The registry of the OOD family, in the tables' order (a new method adds one line).
REGISTRY: Registry[PosthocMethod] = Registry(
    "OOD",
    PosthocMethod,
    (
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
    ),
)

get, register, unregister = REGISTRY.get, REGISTRY.register, REGISTRY.unregister
registered = REGISTRY.registered
__getattr__ = REGISTRY.module_getattr(__name__)  # METHOD_IDS, read when asked


def labels() -> dict[str, str]:
    """Method id -> label in the tables, in the tables' order (read when called, so a method
    registered later is included)."""
    return {m.id: m.label for m in REGISTRY.registered()}


def method_config(method: str, entry: Mapping | None) -> MethodSection:
    """The config of ``method`` from its entry in a study config, ``{"fixed": {...}, "grid": {key:
    [values]}}`` (:func:`pnc.methods.entry.split_entry`; defaults filled in, unknown keys raise)."""
    fixed, grid, _ = split_entry(f"methods.{method}", entry)
    section = {**fixed, **({"grid": grid} if "grid" in (entry or {}) else {})}
    return get(method).make_config(section)


def run_method(method: str, entry: Mapping, ctx: Context, runs: Runs) -> tuple[dict, dict]:
    """``(outputs, record)`` of ``method`` (configured by its ``entry``) on ``ctx`` from its
    training ``runs`` (run id -> run)."""
    return get(method).run(method_config(method, entry), ctx, runs)


def runs_of(method: str, entry: Mapping) -> list[str]:
    """The training runs (ids) ``method``, configured by its ``entry``, reads."""
    return get(method).runs_of(method_config(method, entry))


def run_kinds(extra: Iterable[RunKind] = ()) -> dict[str, RunKind]:
    """Name -> kind of training run, for the kinds the registered methods declare and ``extra``
    (read when called, so a method registered later is included).

    Raises:
        ValueError: two different kinds of one name.
    """
    kinds: dict[str, RunKind] = {}
    for kind in (*(k for m in REGISTRY.registered() for k in m.run_kinds), *extra):
        if kinds.setdefault(kind.name, kind) != kind:
            raise ValueError(f"two different run kinds are named {kind.name!r}")
    return kinds


def recipe_for(run_id: str, train_section: Mapping, swag_starts: Sequence[int] = ()) -> Recipe:
    """The recipe of training run ``run_id``: the config's, and the fields its kind sets
    (:mod:`pnc.methods.ood.training_runs`); the base run's also collects the SWAG moments from
    each of ``swag_starts``.

    Raises:
        ValueError: ``run_id`` names no run of a registered method's kinds.
    """
    kind, value = parse_run(run_id, run_kinds())
    options = dict(train_section)
    if kind is None:
        options["swag_starts"] = tuple(swag_starts)
    else:
        options.update(kind.recipe(value))
    return Recipe(**options)


__all__ = [
    "METHOD_IDS",
    "REGISTRY",
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
    "recipe_for",
    "run_kinds",
    "run_method",
    "runs_of",
    "unregister",
]
