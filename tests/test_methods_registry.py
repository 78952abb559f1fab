"""The method registry, configs from overrides and readable config ids."""

import dataclasses
import itertools
from pathlib import Path

import pytest
from study_config import study_config

import pnc.methods.regression as methods
from pnc.methods.configs import config_id_items
from pnc.methods.regression import TrainingSpec
from pnc.studies.mujoco.grid import expand

#: The paper's grids (Appendix Table 3's search space).
PAPER_GRIDS = {
    "pnc": {
        "sigma": [8, 16, 32],
        "bootstrap_frac": [0.05, 0.1, 0.2, 0.3],
        "ridge": [1e-4, 1e-2],
    },
    "pnc_nocorr": {"sigma": [8, 16, 32]},
    "mc_dropout": {"rate": [0.05, 0.1, 0.2, 0.3, 0.5]},
    "swag": {"scale": [0.1, 0.3, 1, 3, 10]},
    "laplace": {"prior_precision": [1e1, 1e2, 1e3, 1e4, 1e5]},
    "subspace": {"temperature": [1, 10, 100, 1e3, 1e4]},
}


def test_registry_holds_every_method_and_lists_ids_on_error():
    paper = (
        "pnc",
        "pnc_nocorr",
        "deep_ensemble",
        "mc_dropout",
        "swag",
        "laplace",
        "subspace",
        "deep_ensemble_mixture",
    )  # in the tables' order; a new method's registry line may stand anywhere among them
    assert tuple(m for m in methods.METHOD_IDS if m in paper) == paper
    for method_id in methods.METHOD_IDS:
        method = methods.get(method_id)
        assert method.id == method_id
        names = [f.name for f in dataclasses.fields(method.config_cls)]
        keys = set(method.training_fields) | set(method.posthoc_fields)
        assert method.config_keys == tuple(n for n in names if n in keys)
        assert not set(method.training_fields) & set(method.posthoc_fields)
        assert set(method.id_fields) <= keys
        assert not set(method.fixed) & keys and set(method.fixed) <= set(names)
        if method_id not in ("pnc", "pnc_nocorr", "deep_ensemble_mixture"):
            assert set(method.config_keys) == set(names) and not method.fixed
    for exc in (KeyError, ValueError):
        with pytest.raises(exc) as info:
            methods.get("swa")
        for method_id in methods.METHOD_IDS:
            assert method_id in str(info.value)


def test_default_ids_and_training_runs_follow_the_paper():
    expected = {
        "pnc": ("sigma=16,bootstrap_frac=0.1,ridge=0.0001", "base"),
        "pnc_nocorr": ("sigma=16", "base"),
        "deep_ensemble": ("n_members=5", "deep_ensemble-n_members5"),
        "mc_dropout": ("rate=0.05", "mc_dropout-rate0.05"),
        "swag": ("scale=1", "base"),
        "laplace": ("prior_precision=10000", "base"),
        "subspace": ("temperature=1", "subspace-every50-snapshots20-start1000-steps2000"),
    }
    for method_id, (config_id, run_id) in expected.items():
        method = methods.get(method_id)
        config = method.make_config()
        assert method.config_id(config) == config_id
        assert method.training_spec(config).run_id == run_id
    pnc = methods.get("pnc").make_config()
    assert (pnc.n_members, pnc.rank) == (50, 20)
    for method_id in ("mc_dropout", "swag", "laplace", "subspace"):
        assert methods.get(method_id).make_config().n_samples == 100


def test_paper_grids_give_distinct_ids_and_share_runs():
    grids = PAPER_GRIDS
    for method_id, grid in grids.items():
        method = methods.get(method_id)
        configs = [
            method.make_config(dict(zip(grid, values, strict=True)))
            for values in itertools.product(*grid.values())
        ]
        ids = [method.config_id(c) for c in configs]
        assert len(set(ids)) == len(ids)
        runs = {method.training_spec(c).run_id for c in configs}
        if method_id == "mc_dropout":
            assert runs == {f"mc_dropout-rate{r}" for r in grid["rate"]}
        elif method_id == "subspace":  # its own 2,000-step run, shared by every temperature
            assert runs == {"subspace-every50-snapshots20-start1000-steps2000"}
        else:
            assert runs == {"base"}
    assert (
        methods.get("laplace").config_id(
            methods.get("laplace").make_config({"prior_precision": 1e5})
        )
        == "prior_precision=100000"
    )


def test_non_default_fields_appear_in_the_id():
    swag = methods.get("swag")
    a = swag.config_id(swag.make_config({"scale": 0.3}))
    b = swag.config_id(swag.make_config({"scale": 0.3, "n_samples": 30}))
    assert a == "scale=0.3" and b == "scale=0.3,n_samples=30"
    pnc = methods.get("pnc")
    config = pnc.make_config({"layers": [2, 0], "bootstrap_frac": None, "ridge": "1e-2"})
    assert config.layers == (0, 2) and config.ridge == 0.01
    assert pnc.config_id(config) == "sigma=16,bootstrap_frac=None,ridge=0.01,layers=0+2"


def test_pnc_and_its_ablation_share_the_pnc_config():
    pnc, nocorr = methods.get("pnc"), methods.get("pnc_nocorr")
    assert pnc.config_cls is nocorr.config_cls is methods.PnCConfig
    assert pnc.make_config() == methods.PnCConfig()
    config = nocorr.make_config({"sigma": 8, "layers": [1], "rank": 5})
    assert config == methods.PnCConfig(
        sigma=8.0, layers=(1,), rank=5, bootstrap_frac=None, correct=False
    )
    assert nocorr.config_id(config) == "sigma=8,rank=5,layers=1"
    assert nocorr.config_id(nocorr.make_config({"n_members": 10})) == "sigma=16,n_members=10"
    for key in ("ridge", "bootstrap_frac", "correct"):
        with pytest.raises(
            ValueError, match="valid keys: n_members, rank, sigma, layers, perturbation_norm$"
        ):
            nocorr.make_config({key: 0.1})
    with pytest.raises(ValueError, match="correct"):
        pnc.make_config({"correct": False})
    # a config that breaks what the method pins is refused
    with pytest.raises(ValueError, match="pnc_nocorr fixes correct=False"):
        nocorr.config_id(pnc.make_config({"bootstrap_frac": None}))
    with pytest.raises(ValueError, match="pnc fixes correct=True"):
        pnc.training_spec(config)
    with pytest.raises(ValueError, match="fixes ridge=0.0001"):
        nocorr.config_id(methods.PnCConfig(ridge=0.1, bootstrap_frac=None, correct=False))


def test_method_declarations_are_checked():
    with pytest.raises(TypeError, match="not in"):

        class _Bad(methods.SWAG):
            posthoc_fields = ("scale", "temperature")

    with pytest.raises(TypeError, match="fixed"):

        class _BadFixed(methods.SWAG):
            fixed = {"scale": 2.0}


@pytest.mark.parametrize(
    ("method_id", "overrides", "match"),
    [
        ("pnc", {"sigmaa": 8}, "unknown .* valid keys: n_members, rank, sigma"),
        ("pnc", {"sigma": -1.0}, "sigma"),
        ("pnc", {"n_members": 2.5}, "n_members must be an integer"),
        ("pnc_nocorr", {"ridge": 0.1}, "unknown"),
        ("mc_dropout", {"rate": 1.0}, "rate"),
        ("swag", {"scale": "big"}, "scale must be a number"),
        ("swag", {"scale": float("nan")}, "finite"),
        ("laplace", {"prior_precision": 0}, "prior_precision must be > 0"),
        ("subspace", {"burn_in": -1}, "burn_in"),
        ("deep_ensemble", {"n_members": True}, "integer"),
    ],
)
def test_bad_overrides_are_rejected_with_the_key_named(method_id, overrides, match):
    with pytest.raises(ValueError, match=match):
        methods.get(method_id).make_config(overrides)


def test_wrong_config_type_and_training_kind():
    with pytest.raises(TypeError, match="SWAGConfig"):
        methods.get("swag").config_id(methods.get("laplace").make_config())
    with pytest.raises(ValueError, match="kind"):
        methods.train_spec(
            TrainingSpec("boosting"), None, None, model_config=None, train_config=None, key=None
        )
    with pytest.raises(ValueError, match="deep_ensemble"):
        methods.get("deep_ensemble").train(
            TrainingSpec("base"), None, None, model_config=None, train_config=None, key=None
        )


def test_key_ids_pair_pnc_with_its_ablation():
    """The study derives keys from ``key_id``: the ablation shares P&C's, the others their own."""
    assert methods.get("pnc_nocorr").key_id == "pnc"
    assert methods.get("deep_ensemble_mixture").key_id == "deep_ensemble"
    for method_id in methods.METHOD_IDS:
        key_id = methods.get(method_id).key_id
        assert key_id in methods.METHOD_IDS
        if method_id not in ("pnc_nocorr", "deep_ensemble_mixture"):
            assert key_id == method_id


def test_methods_of_both_studies_have_one_label():
    """A method both studies run has the label of pnc.methods.labels in each registry, and every method
    id the two registries share is in that table."""
    from pnc.methods import ood as cifar_methods
    from pnc.methods.labels import SHARED_LABELS

    shared = set(methods.METHOD_IDS) & set(cifar_methods.METHOD_IDS)
    assert shared == set(SHARED_LABELS)
    for method_id, label in SHARED_LABELS.items():
        assert methods.get(method_id).label == label
        assert cifar_methods.get(method_id).label == label


CONFIGS = ("config.yaml", "config/quick.yaml", "config/offline.yaml", ".test/config.yaml")


def _workflow_grids():
    root = Path(__file__).resolve().parents[1]
    for name in CONFIGS:
        for method_id, entry in study_config(name, root)["methods"].items():
            yield name, method_id, entry


@pytest.mark.parametrize("method_id", methods.METHOD_IDS)
def test_parse_config_id_inverts_config_id_over_every_grid(method_id):
    """Every configuration of every workflow config's grid, and the paper grids, read back from
    its id exactly (the dataclass and the id)."""
    method = methods.get(method_id)
    configs = [method.make_config()]
    for _, grid_method, entry in _workflow_grids():
        if grid_method == method_id:
            configs += [point.config for point in expand(method_id, entry)]
    paper = PAPER_GRIDS.get(method_id, {})
    for values in itertools.product(*paper.values()):
        configs.append(method.make_config(dict(zip(paper, values, strict=True))))
    assert len(configs) > 1
    for config in configs:
        text = method.config_id(config)
        parsed = method.parse_config_id(text)
        assert parsed == config and type(parsed) is type(config), text
        assert method.config_id(parsed) == text


def test_parse_config_id_reads_every_value_type_back():
    pnc, nocorr = methods.get("pnc"), methods.get("pnc_nocorr")
    config = pnc.make_config(
        {"layers": [2, 0], "bootstrap_frac": None, "ridge": 1e-5, "subset_per_layer": True}
    )
    text = pnc.config_id(config)
    assert text == "sigma=16,bootstrap_frac=None,ridge=1e-05,layers=0+2,subset_per_layer=True"
    assert pnc.parse_config_id(text) == config
    assert pnc.parse_config_id("default") == pnc.make_config()
    assert config_id_items(text)["layers"] == "0+2" and config_id_items("default") == {}
    # what the ablation pins is not a key of its ids
    with pytest.raises(ValueError, match="valid keys: n_members, rank, sigma"):
        nocorr.parse_config_id("sigma=8,ridge=0.01")
    for bad, match in (
        ("sigma=8,sigma=16", "twice"),
        ("sigma", "not name=value"),
        ("sigma=big", "sigma must be a number"),
        ("sigma=8,noise=1", "unknown PnCConfig key"),
        ("sigma=8,subset_per_layer=yes", "subset_per_layer must be true or false"),
        ("n_members=True", r"n_members must be an integer \(int\), got True"),
    ):
        with pytest.raises(ValueError, match=match):
            pnc.parse_config_id(bad)
    swag = methods.get("swag")
    assert swag.parse_config_id("scale=0.3,covariance=diag") == swag.make_config(
        {"scale": 0.3, "covariance": "diag"}
    )


def test_every_abbreviated_name_is_a_field_of_the_methods_configuration():
    """A method abbreviates only the names its configuration ids hold: its config's fields."""
    for method in methods.registered():
        fields = {f.name for f in dataclasses.fields(method.config_cls)}
        assert set(method.hparam_abbreviations) <= fields, method.id
