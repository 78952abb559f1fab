"""The method registry is the one source of what the workflow's configs and schema say about the
methods: the paper config and its offline twin run the same methods, and the schema names the
registered methods and only keys their config dataclasses accept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from study_config import study_config

import pnc.methods.regression as methods

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def test_offline_config_runs_the_paper_methods_and_protocol():
    """``config/offline.yaml`` is an overlay of ``config.yaml`` that names only the data source
    and the environments: merged in (as ``--configfile`` is), every other key, the methods
    included, is the paper's protocol."""
    paper, offline = study_config("config.yaml"), study_config("config/offline.yaml")
    assert set(_load("config/offline.yaml")) == {"envs", "data"}
    assert offline["methods"] == paper["methods"]
    assert set(offline["methods"]) == set(methods.METHOD_IDS)
    for key in sorted((set(paper) | set(offline)) - {"data", "envs"}):
        assert offline.get(key) == paper.get(key), key
    shared = set(paper["data"]) & set(offline["data"]) - {"source", "seed", "offline_transitions"}
    assert shared and all(offline["data"][k] == paper["data"][k] for k in shared)
    assert sorted(offline["envs"]) == sorted(paper["envs"])


@pytest.mark.parametrize(
    "name", ["config.yaml", "config/quick.yaml", "config/offline.yaml", ".test/config.yaml"]
)
def test_every_config_names_registered_methods_and_their_keys(name):
    for method_id, entry in (_load(name).get("methods") or {}).items():
        keys = set(methods.get(method_id).config_keys)
        named = set((entry or {}).get("fixed") or {}) | set((entry or {}).get("grid") or {})
        assert named <= keys, (name, method_id, sorted(named - keys))


def test_schema_methods_agree_with_the_registered_dataclasses():
    """The schema's method enum is the registry's ids; every key its description documents
    (``method.key``, P&C's protocol keys, what the ablations accept) is an accepted field of that
    method's config dataclass, and every documented choice is accepted by it."""
    block = yaml.safe_load(SCHEMA.read_text())["properties"]["methods"]
    assert block["propertyNames"]["enum"] == list(methods.METHOD_IDS)
    entry_options = {k for m in methods.METHOD_IDS for k in methods.get(m).entry_options}
    assert set(block["additionalProperties"]["properties"]) == {"fixed", "grid", *entry_options}
    text = " ".join(block["description"].split())

    dotted = re.findall(r"`(\w+)\.(\w+)`", text)
    assert len(dotted) >= 5
    for method_id, key in dotted:
        assert key in methods.get(method_id).config_keys, f"{method_id}.{key}"

    pnc_keys = re.findall(r"`(\w+)` \(", text)
    assert {"layers", "calibration_size", "perturbation_norm", "ridge_center"} <= set(pnc_keys)
    for key in set(pnc_keys) - {"fixed", "grid"}:
        assert key in methods.get("pnc").config_keys, key

    accepts = re.findall(r"`(\w+)` accepts ([\w, ]+?) (?:and (\w+) and|only)", text)
    assert {m for m, *_ in accepts} == {"pnc_nocorr", "deep_ensemble_mixture"}
    for method_id, listed, last in accepts:
        keys = [k.strip() for k in listed.split(",")] + ([last] if last else [])
        assert tuple(keys) == methods.get(method_id).config_keys, method_id

    choices = re.findall(r"`([\w.]+)` \(`(\w+)`:[^;]*; `(\w+)`:", text)
    assert len(choices) == 4
    for key, *values in choices:
        method_id, _, field = key.rpartition(".")
        method = methods.get(method_id or "pnc")
        for value in values:
            assert getattr(method.make_config({field: value}), field) == value
        with pytest.raises(ValueError, match=field):
            method.make_config({field: "no_such_choice"})
