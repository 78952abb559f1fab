"""Every registered method of both studies passes the one method contract
(``pnc.methods.checks.check_method``), as scikit-learn's estimators pass ``check_estimator``: the
common checks on every method, the family's checks on its own; a method that breaks it is named
with the check it fails; a toy method registered here passes it with no change to the package."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_methods_new_baseline import Jitter
from test_methods_toy import CONFIGS

import pnc.methods.regression as methods
from pnc.core.predictive import Predictive
from pnc.methods import UnknownMethodError
from pnc.methods import ood as registry
from pnc.methods.checks import (
    COMMON_CHECKS,
    OOD_CHECKS,
    REGRESSION_CHECKS,
    CheckSetting,
    ContractError,
    OODCheckSetting,
    check_configs,
    check_declarations,
    check_method,
    checks_for,
)
from pnc.methods.ood.posthoc import MethodSection, PosthocMethod

FAMILIES = {"regression": methods, "OOD": registry}
EVERY_METHOD = [(f, m) for f, family in FAMILIES.items() for m in family.METHOD_IDS]


def _setting(family: str, method_id: str):
    if family == "regression":
        return CheckSetting(overrides=dict(CONFIGS.get(method_id, {})))
    return OODCheckSetting(section=SECTIONS.get(method_id, {}))


@pytest.mark.parametrize(("family", "method_id"), EVERY_METHOD)
def test_every_method_of_both_families_passes_the_common_checks(family, method_id):
    method = FAMILIES[family].get(method_id)
    assert checks_for(method)[: len(COMMON_CHECKS)] == COMMON_CHECKS
    assert checks_for(method)[len(COMMON_CHECKS) :] == (
        REGRESSION_CHECKS if family == "regression" else OOD_CHECKS
    )
    state: dict = {}
    for check in COMMON_CHECKS:
        check(method, _setting(family, method_id), state)
    assert isinstance(state["config"], method.config_cls)


@pytest.mark.parametrize(("family", "method_id"), EVERY_METHOD)
def test_a_bool_for_an_integer_key_is_refused_naming_key_value_and_type(family, method_id):
    method = FAMILIES[family].get(method_id)
    hints = typing.get_type_hints(method.config_cls)
    ints = [k for k in method.config_keys if hints[k] in (int, int | None)]
    assert ints or family == "OOD"  # every regression method has an integer key
    for key in ints:
        with pytest.raises(ValueError, match=rf"{key} must be an integer \(int\), got True"):
            method.make_config({key: True})


@pytest.mark.parametrize("family", FAMILIES)
def test_an_unknown_method_id_raises_the_same_error_listing_the_family_ids(family):
    ids = FAMILIES[family].METHOD_IDS
    with pytest.raises(UnknownMethodError, match=f"unknown {family} method 'odin'; registered ids: {', '.join(ids)}$"):  # fmt: skip
        FAMILIES[family].get("odin")
    assert issubclass(UnknownMethodError, KeyError) and issubclass(UnknownMethodError, ValueError)


@pytest.mark.slow
@pytest.mark.parametrize("method_id", methods.METHOD_IDS)
def test_every_registered_regression_method_passes_the_contract(method_id):
    overrides = dict(CONFIGS.get(method_id, {}))  # small ones for the paper's methods
    if method_id == "subspace":  # its own run within the checks' 200 steps
        overrides.update(trajectory_steps=200, collect_start=100, collect_every=25, n_snapshots=4)
        overrides.update(rank=3, burn_in=5)
    state = check_method(methods.get(method_id), CheckSetting(overrides=overrides))
    expected = overrides.get("n_samples") or overrides.get("n_members")
    assert state["n_samples"] == expected
    assert state["run"].spec == methods.get(method_id).training_spec(state["config"])


class ForgetsTheKey(Jitter):
    """Breaks the contract: its samples are not a function of the key alone."""

    id: ClassVar[str] = "forgets_the_key"
    calls: ClassVar[list] = []

    def predict(self, posterior, x, *, key):
        self.calls.append(1)
        pred = super().predict(posterior, x, key=key)
        return Predictive(pred.means + len(self.calls), pred.variances)


class WrongShape(Jitter):
    id: ClassVar[str] = "wrong_shape"

    def predict(self, posterior, x, *, key):
        means = jnp.zeros((2, x.shape[0] + 1, 1))
        return Predictive(means, jnp.ones_like(means))


@pytest.mark.parametrize(
    ("cls", "check"),
    [
        (ForgetsTheKey, "determinism: the same key gave other outputs"),
        (WrongShape, "prediction: shapes"),
    ],
)
def test_a_regression_method_that_breaks_the_contract_is_named_with_the_check(cls, check):
    method = methods.register(cls())
    try:
        with pytest.raises(ContractError, match=f"regression method '{cls.id}', check {check}"):
            check_method(method, CheckSetting(overrides={"noise": 0.5}))
    finally:
        methods.unregister(cls.id)
    with pytest.raises(ContractError, match="not the method registered under its id"):
        check_method(cls(), CheckSetting())
    assert checks_for(method)[0] is check_declarations


#: small sections of the paper's methods (paper-sized defaults elsewhere; a method not listed
#: runs the contract with its defaults)
SECTIONS = {
    "mahalanobis": {},
    "react_energy": {"percentile": 80},
    "llla": {"n_samples": 3, "grid": {"prior_precision": [1.0, 10.0]}},
    "epinet": {
        "n_samples": 3,
        "hiddens": [8],
        "epochs": 1,
        "batch_size": 16,
        "grid": {"prior_scale": [1.0]},
    },  # fmt: skip
    "swag": {
        "n_samples": 2,
        "rank": 2,
        "bn_refresh": 16,
        "bn_batch_size": 8,
        "grid": {"start_epoch": [0, 1]},
    },  # fmt: skip
    "pnc": {
        "n_members": 3,
        "rank": 2,
        "calibration_size": 16,
        "chunk_size": 8,
        "grid": {"block": [[1, 0], [0, 0]], "sigma": [1.0, 2.0], "bootstrap_frac": [0.5]},
    },  # fmt: skip
    "deep_ensemble": {"n_models": 2},
    "mc_dropout": {"n_samples": 3, "grid": {"rate": [0.1, 0.3]}},
    "msp": {},
    "energy": {},
}


def test_every_small_section_is_of_a_registered_method():
    assert set(SECTIONS) <= set(registry.METHOD_IDS)


@pytest.mark.slow
@pytest.mark.parametrize("method_id", registry.METHOD_IDS)
def test_every_registered_ood_method_passes_the_contract(method_id):
    section = SECTIONS.get(method_id, {})  # small ones for the paper's methods
    state = check_method(registry.get(method_id), OODCheckSetting(section=section))
    grid = section.get("grid", {})
    # every configuration of an ensemble's grid is tried (P&C: both blocks, then the second sigma
    # at the better one; the Deep Ensemble: its one), the single-model scores have no selection
    tried = int(np.prod([len(v) for v in grid.values()])) if grid else 0
    tried = {"pnc": 3, "deep_ensemble": 1}.get(method_id, tried)
    assert len(state["record"]["sweep"]) == tried
    assert registry.get(method_id).selects == bool(tried)  # the workflow's sweep and selection jobs
    assert state["study_problems"] == []


@dataclasses.dataclass(frozen=True)
class TemperedSection(MethodSection):
    """The toy's section: a grid of logit scales."""

    grid_keys: ClassVar[tuple[str, ...]] = ("scale",)
    noise: float = 0.0


class Tempered(PosthocMethod):
    """Toy CIFAR method: the base network's logits scaled by each ``scale`` of the grid, plus
    a fixed noise drawn from its key; the scale selected on validation like every ensemble."""

    id: ClassVar[str] = "tempered"
    label: ClassVar[str] = "Tempered"
    config_cls: ClassVar[type[MethodSection]] = TemperedSection

    def candidates(self, config, ctx, runs):
        from pnc.core.classifier import model

        v = runs["base"].variables

        def build(scale):
            draw = jax.random.normal(self.key(ctx, scale), (ctx.config.num_classes,))
            noise = config.noise * np.asarray(draw)
            return lambda x: (model.network_logits(v, x, ctx.config, ctx.batch_size) * scale + noise)[None]  # fmt: skip

        return [({"scale": scale}, functools.partial(build, scale)) for scale in config.values("scale")]  # fmt: skip


class ForgetsTheSeed(Tempered):
    """Breaks the contract: its confidences change from one run to the next."""

    id: ClassVar[str] = "forgets_the_seed"
    calls: ClassVar[list] = []

    def score(self, config, ctx, runs, chosen):
        self.calls.append(1)
        out, fields = super().score(config, ctx, runs, chosen)
        return {**out, "test_conf": out["test_conf"] + len(self.calls)}, fields


class OneConfidenceShort(Tempered):
    id: ClassVar[str] = "one_confidence_short"

    def score(self, config, ctx, runs, chosen):
        out, fields = super().score(config, ctx, runs, chosen)
        return {**out, "far_conf": out["far_conf"][:-1]}, fields


class TupleNamed(Tempered):
    """Breaks the contract: its configurations are named by tuples, which JSON reads back as
    lists, so the scores job finds no configuration the selection stage chose."""

    id: ClassVar[str] = "tuple_named"

    def candidates(self, config, ctx, runs):
        return [({"scale": (name["scale"],)}, build) for name, build in super().candidates(config, ctx, runs)]  # fmt: skip


TOY_SECTION = {"noise": 0.1, "grid": {"scale": [0.5, 2.0]}}
#: Its entry in a study config.
TOY_ENTRY = {"fixed": {"noise": 0.1}, "grid": {"scale": [0.5, 2.0]}}


@pytest.mark.slow
def test_a_toy_method_registered_outside_the_package_passes_the_contract():
    method = registry.register(Tempered())
    try:
        state = check_method(method, OODCheckSetting(section=TOY_SECTION))
        assert [r["config"] for r in state["record"]["sweep"]] == [{"scale": 0.5}, {"scale": 2.0}]
        assert registry.labels()["tempered"] == "Tempered"
        assert registry.runs_of("tempered", TOY_ENTRY) == ["base"]
        ctx = state["context"]
        assert state["outputs"]["test_conf"].shape == (ctx.test_x.shape[0],)
        assert np.isfinite(state["record"]["temperature"])
        assert method is registry.get("tempered")
    finally:
        registry.unregister("tempered")
    assert "tempered" not in registry.METHOD_IDS and "tempered" not in registry.labels()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cls", "check", "problem"),
    [
        (ForgetsTheSeed, "determinism", "the same key gave other outputs"),
        (OneConfidenceShort, "scores", "far_conf is not a finite confidence per image"),
        (TupleNamed, "stages", "the jobs fail where one run does not"),
    ],
)
def test_an_ood_method_that_breaks_the_contract_is_named_with_the_check(cls, check, problem):
    method = registry.register(cls())
    try:
        with pytest.raises(ContractError, match=f"OOD method '{cls.id}', check {check}: {problem}"):  # fmt: skip
            check_method(method, OODCheckSetting(section=TOY_SECTION))
    finally:
        registry.unregister(cls.id)
    with pytest.raises(ContractError, match="not the method registered under its id"):
        check_method(cls(), OODCheckSetting(section=TOY_SECTION))
    assert checks_for(method)[0] is check_declarations


def test_declarations_are_checked_when_a_method_class_is_defined():
    with pytest.raises(TypeError, match="no label declared"):

        class NoLabel(PosthocMethod):
            id: ClassVar[str] = "no_label"
            config_cls: ClassVar[type[MethodSection]] = TemperedSection

    with pytest.raises(TypeError, match="config_cls <class 'dict'> is not a"):

        class NotASection(PosthocMethod):
            id: ClassVar[str] = "not_a_section"
            label: ClassVar[str] = "X"
            config_cls: ClassVar[type] = dict

    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("msp").__class__())
    with pytest.raises(TypeError, match="not a method of the OOD family"):
        registry.register(object())


def test_an_unknown_key_is_refused_by_the_configs_check():
    class Lenient(Tempered):
        id: ClassVar[str] = "lenient"

        def make_config(self, overrides=None):
            return TemperedSection(grid={"scale": [1.0]})

    method = registry.register(Lenient())
    try:
        with pytest.raises(ContractError, match="check configs: an unknown key: .* was accepted"):
            check_configs(method, OODCheckSetting(section=TOY_SECTION), {})
    finally:
        registry.unregister("lenient")
