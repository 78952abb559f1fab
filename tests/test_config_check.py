"""Cross-key checks of the MuJoCo study config, as Python functions (pnc.studies.mujoco.config_check), each
method checking its own configurations (MethodBase.study_problems)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from study_config import study_config

from pnc.studies.mujoco import grid
from pnc.studies.mujoco.config_check import cross_key_problems, data_problems, study_context

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def _config(name: str = ".test/config.yaml", change=None) -> dict:
    """config.yaml with ``name`` merged in, as the workflow sees it (study_config)."""
    return study_config(name, change=change)


def _problems(change=None, name=".test/config.yaml"):
    config = _config(name, change)
    return cross_key_problems(config, grid.expand_all(config["methods"]))


@pytest.mark.parametrize("name", [".test/config.yaml", "config.yaml", "config/offline.yaml",
                                  "config/quick.yaml"])  # fmt: skip
def test_shipped_configs_have_no_problems(name):
    found = _problems(name=name)
    assert found.errors == [] and found.warnings == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda c: c["data"].update(far_transitions=10),
            "data.far_transitions = 10 is smaller than data.transitions_per_regime",
        ),
        (
            lambda c: c["data"].update(source="offline", offline_transitions=100),
            "data.offline_transitions = 100 cannot hold the ID pool",
        ),
        (
            lambda c: c["model"].update(min_logvar=3.0, max_logvar=2.0),
            "model.min_logvar = 3.0 must be < model.max_logvar = 2.0",
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(layers=[7]),
            "methods.pnc.layers: layers (7,) out of range",
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(rank=100000),
            "methods.pnc.rank = 100000 is larger than the kernel of perturbed hidden layer 0: "
            "d_in 5 (InvertedPendulum: obs 4 + action 1)",
        ),
        (
            lambda c: c["methods"]["pnc"]["fixed"].update(calibration_size=10**6),
            "methods.pnc.calibration_size = 1000000 is larger than the",
        ),
        (
            lambda c: c["train"].update(steps=10),
            "train.collection over train.steps = 10 steps collect 0 iterate(s)",
        ),
    ],
)
def test_each_problem_is_one_line_naming_the_key(change, expected):
    found = _problems(change)
    assert len(found.errors) == 1 and found.errors[0].startswith(expected), found.errors


def test_every_problem_is_reported_not_only_the_first():
    def change(c):
        c["methods"]["pnc"]["fixed"].update(rank=100000, calibration_size=10**6)

    errors = _problems(change).errors
    assert len(errors) == 2
    assert errors[0].startswith("methods.pnc.rank") and errors[1].startswith(
        "methods.pnc.calibration_size"
    )


def test_rank_above_the_kept_columns_is_a_warning():
    found = _problems(lambda c: c["methods"]["swag"].setdefault("fixed", {}).update(rank=1000))
    assert found.errors == []
    assert len(found.warnings) == 1 and found.warnings[0].startswith(
        "methods.swag.rank = 1000 is above the"
    )


def test_study_context_reads_the_pool_and_the_inputs():
    config = _config()
    context = study_context(config)
    assert context.input_dims == {"InvertedPendulum": (4, 1)}
    pool = config["data"]["transitions_per_regime"]
    assert 0 < context.max_train_rows < pool
    bad = copy.deepcopy(config)
    bad["data"]["val_fraction"] = 1.5
    assert data_problems(bad)[0].startswith("data: ")
