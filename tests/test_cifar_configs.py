"""The CIFAR study's configs: ``config/cifar.yaml`` holds the defaults and is always loaded
(cifar.smk's ``configfile:``); every other CIFAR config is an overlay that names only what it
changes (Snakemake deep-merges ``--configfile`` over the defaults). Each overlay's effective config,
the methods it runs and every method's sweep (configurations, their order and ids) are exactly
those the full config files gave before they were cut to overlays, recorded in
``tests/data/cifar_effective_configs.json``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config, validate

from pnc.runtime.config_schema import integer_seeds

ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = "config/cifar.yaml"
SCHEMA = ROOT / "workflow/schemas/cifar.schema.yaml"
FIXTURE = ROOT / "tests/data/cifar_effective_configs.json"

#: config name -> the files given with --configfile (besides the defaults)
OVERLAYS = {
    "cifar.yaml": [],
    "cifar_tiny.yaml": ["config/cifar_tiny.yaml"],
    "cifar_smoke.yaml": ["config/cifar_smoke.yaml"],
    "cifar100.yaml": ["config/cifar100.yaml"],
    "cifar_authors.yaml": ["config/cifar_authors.yaml"],
}


def _drop_none(obj):
    """``obj`` without the keys whose value is null (a null setting is its default)."""
    if isinstance(obj, dict):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def effective(files: list[str], defaults: bool = True) -> dict:
    """What the workflow reads from ``files`` (over the defaults unless ``defaults`` is false):
    the config as validated (the schema's defaults filled in), the methods that run, in order,
    and every method's sweep (as workflow/rules/cifar/common.smk derives them)."""
    from pnc.studies.cifar.sweep import evaluated_methods, expand_sweep

    # as Snakemake merges: the --configfile files first, then `configfile:` (the defaults) and
    # the files once more over them (so the keys come in the overlay's order)
    given: dict = {}
    for path in files:
        update_config(given, yaml.safe_load((ROOT / path).read_text()))
    config = copy.deepcopy(given)
    if defaults:
        update_config(config, yaml.safe_load((ROOT / DEFAULTS).read_text()))
        update_config(config, given)
    integer_seeds(config)
    validate(config, str(SCHEMA))
    methods = evaluated_methods(config)  # as workflow/rules/cifar/common.smk
    sweeps = {m: expand_sweep(m, config["methods"][m]).to_table() for m in methods}
    return {"config": _drop_none(config), "methods": methods, "sweeps": sweeps}


def _today() -> dict:
    """The record, written from the full config files (each replaced the defaults; the authors'
    reporting was given after config/cifar.yaml)."""
    return {
        name: effective(
            [DEFAULTS] if name == "cifar.yaml" else files,
            defaults=name == "cifar_authors.yaml",
        )
        for name, files in OVERLAYS.items()
    }


@pytest.mark.parametrize("name", list(OVERLAYS))
def test_each_overlay_gives_the_recorded_config_methods_and_sweeps(name):
    recorded = json.loads(FIXTURE.read_text())[name]
    now = json.loads(json.dumps(effective(OVERLAYS[name])))
    assert now["methods"] == recorded["methods"]
    for method, sweep in recorded["sweeps"].items():
        assert now["sweeps"][method] == sweep, method
        # the order and ids, not only the same mapping
        assert list(now["sweeps"][method]) == list(sweep)
    assert now["config"] == recorded["config"]


def test_overlays_name_only_what_they_change():
    """No overlay repeats a value of the defaults (a repeated value could drift from them)."""
    defaults = yaml.safe_load((ROOT / DEFAULTS).read_text())

    def repeated(overlay, base, where=""):
        for key, value in overlay.items():
            if key not in base:
                continue
            if isinstance(value, dict) and isinstance(base[key], dict):
                yield from repeated(value, base[key], f"{where}{key}.")
            elif value == base[key]:
                yield f"{where}{key}"

    for files in OVERLAYS.values():
        for path in files:
            overlay = yaml.safe_load((ROOT / path).read_text())
            assert list(repeated(overlay, defaults)) == [], path


def test_the_sweeps_keep_the_configs_keys_and_values():
    """``bootstrap_frac`` stays ``bootstrap_frac``; P&C's points are the product of block, sigma,
    bootstrap_frac, the last fastest; the ids follow that order."""
    table = effective(OVERLAYS["cifar_tiny.yaml"])["sweeps"]["pnc"]
    points = {i: {k: r["config"][k] for k in ("block", "sigma", "bootstrap_frac")} for i, r in table.items()}
    assert points == {
        "block=1+0,sigma=1,bootstrap_frac=0.5": {"block": [1, 0], "sigma": 1.0, "bootstrap_frac": 0.5},
        "block=1+0,sigma=4,bootstrap_frac=0.5": {"block": [1, 0], "sigma": 4.0, "bootstrap_frac": 0.5},
        "block=0+0,sigma=1,bootstrap_frac=0.5": {"block": [0, 0], "sigma": 1.0, "bootstrap_frac": 0.5},
        "block=0+0,sigma=4,bootstrap_frac=0.5": {"block": [0, 0], "sigma": 4.0, "bootstrap_frac": 0.5},
    }
    # each record is the whole configuration: the settings (defaults filled in) and the point
    assert {r["config"]["n_members"] for r in table.values()} == {6}
    assert {r["config"]["perturbation_norm"] for r in table.values()} == {"radius"}
    paper = effective([])["sweeps"]
    assert len(paper["pnc"]) == 6 * 3 * 3
    assert paper["deep_ensemble"] == {"default": {"config": {"n_models": 5}}}
    assert paper["msp"] == {"default": {"config": {}}}  # selects nothing: its settings only


if __name__ == "__main__":  # write the record (only from the full, uncut config files)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(_today(), indent=1) + "\n")
