"""What a new baseline needs: one method class, one registry line, config entries. A toy method
registered here (``tests/toy_baseline.py``, the module the tiny run's four-file test adds to the
package) reaches training, construction, prediction, the results vocabulary (labels, row
order, figure style, hyperparameter abbreviations) and the config schema's method names."""

from pathlib import Path
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import yaml
from toy_baseline import Jitter, JitterConfig

import pnc.methods.regression as methods
from pnc import MLPConfig, TrainConfig
from pnc.methods.regression.base_run import OnBaseRun
from pnc.methods.regression.contract import MethodBase
from pnc.studies.mujoco import mechanism_columns, results, results_table

SCHEMA = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"


@pytest.fixture
def jitter():
    method = methods.register(Jitter())
    yield method
    methods.unregister("jitter")
    assert "jitter" not in methods.METHOD_IDS


def test_registered_method_is_found_trained_and_sampled(jitter):
    assert methods.get("jitter") is jitter and "jitter" in methods.METHOD_IDS
    config = jitter.make_config({"noise": 0.5})
    assert jitter.config_id(config) == "noise=0.5"
    with pytest.raises(ValueError, match="unknown"):
        jitter.make_config({"nois": 0.5})
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 2)).astype(np.float32)
    y = x[:, :1] ** 2
    run = methods.train_spec(
        jitter.training_spec(config),
        x,
        y,
        model_config=MLPConfig(out_dim=1, hidden=(8,)),
        train_config=TrainConfig(steps=20, batch_size=16),
        key=jax.random.key(0),
    )
    assert run.spec.kind == "base"
    posterior = jitter.build(run, config, x, y, key=jax.random.key(1))
    pred = jitter.predict(posterior, jnp.asarray(x[:5]), key=jax.random.key(2))
    assert pred.means.shape == (4, 5, 1)


def test_registered_method_reaches_the_results_vocabulary(jitter):
    # the vocabulary is read from the registry when used, so a method registered after import
    # is seen, and gone again once unregistered
    info = results.METHOD_INFO
    assert list(info)[-4:] == ["jitter", "pnc", "pnc_nocorr", "deep_ensemble_mixture"]  # row 55
    assert info["jitter"].label == "Jitter" and info["jitter"].short == "Jit."
    assert info["jitter"].ranked and info["jitter"].style["marker"] == "*"
    assert "jitter" in results.METHODS and "jitter" in results.RANKED_METHODS
    assert results.HPARAM_ABBREVIATIONS["noise"] == "jn"
    # its legend follows the methods before it in row order, before the shared abbreviations
    legend = ["n", "dr", "sws", "prior", "T", "jn", "lreg", "bf", "ps", "K", "S"]
    assert list(results.HPARAM_LEGEND) == legend and results.HPARAM_LEGEND["jn"] == "Jitter noise"
    assert results_table.validate(_one_row("jitter"))["method"].tolist() == ["jitter"]
    methods.unregister("jitter")
    try:
        assert "jitter" not in results.METHOD_INFO and "jitter" not in results.METHODS
        assert "noise" not in results.HPARAM_ABBREVIATIONS and "jn" not in results.HPARAM_LEGEND
        with pytest.raises(results_table.ResultsError, match="unknown method"):
            results_table.validate(_one_row("jitter"))
    finally:
        methods.register(jitter)


def _one_row(method_id):
    return pd.DataFrame(
        [{"env": "A", "method": method_id, "seed": 0, "split": "id", "metric": "rmse", "value": 1}]
    )


def test_a_registered_method_reaches_the_selected_configuration_table(jitter):
    from pnc.report.tables import abbreviate_config, hparams_table

    config = jitter.config_id(jitter.make_config({"noise": 0.5}))
    assert jitter.parse_config_id(config) == jitter.make_config({"noise": 0.5})
    assert abbreviate_config(config) == "jn=0.5"
    frame = pd.concat([_one_row("jitter"), _one_row("pnc")]).assign(
        config=[config, "sigma=16,bootstrap_frac=0.1,ridge=0.0001"]
    )
    caption = hparams_table(results_table.validate(frame)).caption
    assert "T: Subspace temperature" not in caption
    assert "jn: Jitter noise; lreg: P&C ridge (Tikhonov) regulariser" in caption


class JitterWithSamples(Jitter):
    """The toy baseline with weight samples: the base network, its kernels shifted by eps."""

    id: ClassVar[str] = "jitter_samples"
    label: ClassVar[str] = "Jitter (weights)"
    short_label: ClassVar[str] = "JitW"
    table_order: ClassVar[int] = 35
    hparam_abbreviations: ClassVar[dict[str, str]] = {}
    hparam_legend: ClassVar[dict[str, str]] = {}

    def parameter_samples(self, posterior, key):
        params = {"dense": {"kernel": jnp.ones((2, 1))}}
        eps = posterior["eps"]
        return jax.tree.map(lambda w: w[None] + eps[:, None, None], params), params


#: The mechanism stage's methods of the package, in their order.
MECHANISM_BUILT_IN = ("pnc", "pnc_nocorr", "swag", "laplace", "subspace")


def test_a_method_with_weight_samples_joins_the_mechanism_stage(jitter):
    assert not jitter.has_parameter_samples
    assert mechanism_columns.mechanism_methods() == mechanism_columns.MECHANISM_METHODS
    assert mechanism_columns.MECHANISM_METHODS == MECHANISM_BUILT_IN
    assert all(methods.get(m).has_parameter_samples for m in mechanism_columns.MECHANISM_METHODS)
    method = methods.register(JitterWithSamples())
    try:
        assert method.has_parameter_samples
        # P&C and its ablation first, then the others by table_order: swag (30), the new one (35), ...
        assert mechanism_columns.MECHANISM_METHODS == (
            "pnc", "pnc_nocorr", "swag", "jitter_samples", "laplace", "subspace"
        )  # fmt: skip
        samples, reference = method.parameter_samples(
            method.build(None, JitterConfig(), None, np.zeros((1, 1)), key=jax.random.key(0)),
            jax.random.key(1),
        )
        assert samples["dense"]["kernel"].shape == (4, 2, 1)
    finally:
        methods.unregister("jitter_samples")
    assert mechanism_columns.MECHANISM_METHODS == MECHANISM_BUILT_IN


def test_conflicting_abbreviations_and_duplicate_ids_raise(jitter):
    with pytest.raises(ValueError, match="already registered"):
        methods.register(Jitter())

    class Clash(Jitter):
        id: ClassVar[str] = "clash"
        hparam_abbreviations: ClassVar[dict[str, str]] = {"rank": "r"}
        hparam_legend: ClassVar[dict[str, str]] = {"r": "the clashing rank"}

    methods.register(Clash())
    try:
        with pytest.raises(ValueError, match="'rank' is given two ways"):
            dict(results.HPARAM_ABBREVIATIONS)
    finally:
        methods.unregister("clash")


def test_method_declarations_are_checked():
    with pytest.raises(TypeError, match="no label"):

        class NoLabel(OnBaseRun, MethodBase):
            id: ClassVar[str] = "nolabel"
            config_cls: ClassVar[type] = JitterConfig
            posthoc_fields: ClassVar[tuple[str, ...]] = ("noise",)
            short_label: ClassVar[str] = "N"
            table_order: ClassVar[int] = 1
            style: ClassVar[dict[str, object]] = dict(Jitter.style)

    with pytest.raises(TypeError, match="style must set"):

        class BadStyle(Jitter):
            style: ClassVar[dict[str, object]] = {"color": "#000000"}

    with pytest.raises(TypeError, match="reading_of is not ranked"):

        class RankedReading(Jitter):
            reading_of: ClassVar[str] = "swag"

    for legend in ({"jx": "not an abbreviation of its own"}, {"K": "a shared abbreviation"}):
        with pytest.raises(TypeError, match="hparam_legend"):

            class BadLegend(Jitter):
                hparam_legend: ClassVar[dict[str, str]] = legend


def test_registry_is_the_one_list_of_methods():
    schema = yaml.safe_load(SCHEMA.read_text())
    assert (
        dict(results.READINGS)
        == {m.reading_of: m.id for m in methods.registered() if m.reading_of}
        == {methods.DEEP_ENSEMBLE_ID: "deep_ensemble_mixture"}
    )
    assert results.DEEP_ENSEMBLE == methods.DEEP_ENSEMBLE_ID == "deep_ensemble"
    assert schema["properties"]["methods"]["propertyNames"]["enum"] == list(methods.METHOD_IDS)
    assert list(results.METHOD_INFO) == [
        m.id for m in sorted(methods.registered(), key=lambda m: m.table_order)
    ]
    for method in methods.registered():
        assert results.METHOD_INFO[method.id].label == method.label
        for name, short in method.hparam_abbreviations.items():
            assert results.HPARAM_ABBREVIATIONS[name] == short
