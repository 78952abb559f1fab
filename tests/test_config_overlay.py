"""Config overlays: config.yaml holds the defaults and every other config is merged into it key by
key, as Snakemake merges a ``--configfile`` into the Snakefile's ``configfile:``
(``snakemake.utils.update_config``). Each overlay must give exactly the study its stand-alone file
gave before the files became overlays: the configurations (ids, order, typed values, training runs,
calibration pools) and every other key after the schema's defaults. The expected values are
tests/data/grid_expansions.json, dumped from the stand-alone files before they were cut."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config, validate
from study_config import study_config as study

from pnc.runtime.config_schema import schema_problems
from pnc.studies.mujoco import grid
from pnc.studies.mujoco.config_check import ordered_like, run_methods
from pnc.studies.mujoco.config_check import overlay as overlay_config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"
EXPECTED = json.loads((ROOT / "tests" / "data" / "grid_expansions.json").read_text())
OVERLAYS = ("config/quick.yaml", "config/offline.yaml", "config/offline_authors.yaml",
            ".test/config.yaml")  # fmt: skip


def _defaults() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


@pytest.mark.parametrize("overlay", [None, *OVERLAYS])
def test_overlay_gives_the_stand_alone_study(overlay):
    config = study(overlay)
    want = EXPECTED["config.yaml" if overlay is None else overlay]
    points = grid.expand_all(config["methods"])
    assert list(points) == want["methods"]  # the methods that run, in their order
    for method, pts in points.items():
        table = json.loads(json.dumps(grid.table_of(pts)))
        assert list(table) == list(want["grid"][method]), method  # ids, in grid order
        assert table == want["grid"][method], method  # typed values, runs, calibration pools
    rest = {k: v for k, v in config.items() if k not in ("methods", "run_methods")}
    assert rest == want["config"]


def test_overlays_name_no_methods_block_copy():
    """An overlay repeats no value of config.yaml's methods (it names only what it changes)."""
    defaults = _defaults()["methods"]
    for overlay in OVERLAYS:
        methods = yaml.safe_load((ROOT / overlay).read_text()).get("methods") or {}
        for method, entry in methods.items():
            for part in ("fixed", "grid"):
                for key, value in (entry.get(part) or {}).items():
                    same = (defaults[method].get(part) or {}).get(key) == value
                    assert not same, f"{overlay}: methods.{method}.{part}.{key} copies config.yaml"


def test_schema_defaults_do_not_shadow_config_yaml():
    """Validation fills in the schema's defaults only where config.yaml is silent."""
    raw = _defaults()
    filled = copy.deepcopy(raw)
    validate(filled, str(SCHEMA))

    def check(a, b, path):
        for key, value in a.items():
            if isinstance(value, dict):
                check(value, b[key], f"{path}{key}.")
            else:
                assert b[key] == value, f"{path}{key}: schema default shadows config.yaml"

    check(raw, filled, "")


def test_run_methods_default_and_order():
    assert list(study(None)["methods"]) == list(_defaults()["methods"])
    config = _defaults()
    config["run_methods"] = ["swag", "pnc"]
    assert list(run_methods(config)) == ["swag", "pnc"]


def test_unknown_run_method_is_named():
    config = _defaults()
    config["run_methods"] = ["pnc", "swagg"]
    problems = schema_problems(config, yaml.safe_load(SCHEMA.read_text()))
    assert len(problems) == 1 and "run_methods[1] = 'swagg'" in problems[0]
    assert "swag" in problems[0]  # the valid ids are listed
    del config["methods"]["laplace"]
    config["run_methods"] = ["pnc", "laplace"]
    with pytest.raises(ValueError, match=r"run_methods names \['laplace'\], which have no entry"):
        run_methods(config)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_merges_as_snakemake_does(overlay):
    """pnc.studies.mujoco.config_check.overlay (read by pnc.report.variant) is Snakemake's merge of an
    overlay into the defaults, in the defaults' key order."""
    defaults, changes = _defaults(), yaml.safe_load((ROOT / overlay).read_text())
    merged = overlay_config(defaults, changes)
    update_config(defaults, changes)
    assert merged == defaults
    assert json.dumps(merged) == json.dumps(defaults)  # the same key order too


def test_the_defaults_key_order_is_restored_after_snakemakes_merge():
    """Snakemake starts the config from the --configfile overlay and merges config.yaml into it,
    so a merged mapping lists the overlay's keys first (the quick default's methods would run
    with the Deep Ensemble last, which reorders every table); common.smk restores config.yaml's
    order (ordered_like), which the expansions above were compared in."""
    defaults, changes = _defaults(), yaml.safe_load((ROOT / "config/quick.yaml").read_text())
    merged = copy.deepcopy(changes)
    update_config(merged, defaults)
    update_config(merged, changes)
    assert list(merged["methods"]) != list(defaults["methods"])  # Snakemake's order
    assert list(ordered_like(merged, defaults)["methods"]) == list(defaults["methods"])
    swapped = {"methods": {"pnc": {"grid": {"ridge": [0.01], "sigma": [8.0]}}}}
    grid_order = ordered_like(overlay_config(defaults, swapped), defaults)["methods"]["pnc"]["grid"]
    assert list(grid_order) == ["sigma", "bootstrap_frac", "ridge"]  # the cross product's order
