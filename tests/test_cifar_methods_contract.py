"""Every registered CIFAR method passes the CIFAR method contract
(``pnc.cifar.methods.detector_checks.check_method``), as scikit-learn's estimators pass
``check_estimator``; a method that breaks it is named with the check it fails; a toy method
registered here passes it with no change to the package."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import numpy as np
import pytest

from pnc.cifar import methods as registry
from pnc.cifar.methods.detector_checks import (
    CHECKS,
    CifarCheckSetting,
    CifarContractError,
    check_method,
)
from pnc.cifar.posthoc import MethodSection, PosthocMethod

#: small sections of every method (paper-sized defaults elsewhere)
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


def test_every_registered_method_has_a_small_section_here():
    assert set(SECTIONS) == set(registry.METHOD_IDS)


@pytest.mark.slow
@pytest.mark.parametrize("method_id", list(SECTIONS))
def test_every_registered_method_passes_the_contract(method_id):
    state = check_method(method_id, CifarCheckSetting(section=SECTIONS[method_id]))
    grid = SECTIONS[method_id].get("grid", {})
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
        from pnc.cifar import baselines as B

        v = runs["base"].variables

        def build(scale):
            draw = jax.random.normal(self.key(ctx, scale), (ctx.config.num_classes,))
            noise = config.noise * np.asarray(draw)
            return lambda x: (B.network_logits(v, x, ctx.config, ctx.batch_size) * scale + noise)[None]  # fmt: skip

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


@pytest.mark.slow
def test_a_toy_method_registered_outside_the_package_passes_the_contract():
    method = registry.register(Tempered())
    try:
        state = check_method("tempered", CifarCheckSetting(section=TOY_SECTION))
        assert [r["config"] for r in state["record"]["sweep"]] == [{"scale": 0.5}, {"scale": 2.0}]
        assert registry.labels()["tempered"] == "Tempered"
        assert registry.runs_of("tempered", TOY_SECTION) == ["base"]
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
        (ForgetsTheSeed, "determinism", "a second run gave other outputs"),
        (OneConfidenceShort, "scores", "far_conf is not a finite confidence per image"),
        (TupleNamed, "stages", "the jobs fail where one run does not"),
    ],
)
def test_a_method_that_breaks_the_contract_is_named_with_the_check(cls, check, problem):
    registry.register(cls())
    try:
        with pytest.raises(CifarContractError, match=f"method '{cls.id}', check {check}: {problem}"):  # fmt: skip
            check_method(cls.id, CifarCheckSetting(section=TOY_SECTION))
    finally:
        registry.unregister(cls.id)
    with pytest.raises(CifarContractError, match="not the method registered under its id"):
        check_method(cls(), CifarCheckSetting(section=TOY_SECTION))
    assert [c.__name__ for c in CHECKS][0] == "check_declarations"


def test_declarations_are_checked_when_a_method_class_is_defined():
    with pytest.raises(TypeError, match="no label declared"):

        class NoLabel(PosthocMethod):
            id: ClassVar[str] = "no_label"
            config_cls: ClassVar[type[MethodSection]] = TemperedSection

    with pytest.raises(TypeError, match="is not a MethodSection"):

        class NotASection(PosthocMethod):
            id: ClassVar[str] = "not_a_section"
            label: ClassVar[str] = "X"
            config_cls: ClassVar[type] = dict

    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.get("msp").__class__())
    with pytest.raises(TypeError, match="not a CIFAR method"):
        registry.register(object())
    with pytest.raises(ValueError, match="unknown method 'odin'; known: mahalanobis"):
        registry.get("odin")


def test_an_unknown_key_is_refused_by_the_configs_check():
    class Lenient(Tempered):
        id: ClassVar[str] = "lenient"

        def config(self, section):
            return TemperedSection(grid={"scale": [1.0]})

    registry.register(Lenient())
    try:
        with pytest.raises(CifarContractError, match="check configs: an unknown key: the section"):
            check_method("lenient", CifarCheckSetting(section=TOY_SECTION))
    finally:
        registry.unregister("lenient")
