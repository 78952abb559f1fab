"""ARS behaviour policies: learning on InvertedPendulum-v5, level ordering, stored copies."""

import dataclasses
import json

import numpy as np
import pytest

from pnc.data import CacheConflictError
from pnc.data.ars import (
    DEFAULT_CONFIGS,
    POLICY_DIR,
    ARSConfig,
    LinearPolicy,
    evaluate,
    load_policies,
    train_ars,
    train_behaviour_policies,
)

QUICK = ARSConfig(
    iterations=16,
    n_directions=4,
    top_directions=2,
    step_size=0.03,
    noise=0.1,
    horizon=300,
    eval_every=2,
    eval_episodes=3,
)


def test_ars_improves_inverted_pendulum_quickly():
    checkpoints, info = train_ars("InvertedPendulum", QUICK, seed=0)
    first, best = checkpoints[0].eval_return, max(c.eval_return for c in checkpoints)
    assert best > 2 * first
    assert info["timesteps"] > 0 and checkpoints[-1].iteration == QUICK.iterations


def test_checkpoints_are_ordered_by_return_and_reused(tmp_path):
    record = train_behaviour_policies(
        "InvertedPendulum", tmp_path, seed=0, config=QUICK, final_eval_episodes=3
    )
    levels = record["levels"]
    assert set(levels) == {"expert", "medium"}  # InvertedPendulum has no Mid level
    assert levels["medium"]["return_mean"] < levels["expert"]["return_mean"]
    assert levels["medium"]["iteration"] < levels["expert"]["iteration"]
    assert record["ordered_by_return"]
    policies, stored = load_policies("InvertedPendulum", tmp_path)
    assert (
        stored["levels"]
        == json.loads((tmp_path / "InvertedPendulum" / "policies.json").read_text())["levels"]
    )
    assert policies["expert"].matrix.shape == (1, 4)
    assert (
        train_behaviour_policies(
            "InvertedPendulum", tmp_path, seed=0, config=QUICK, final_eval_episodes=3
        )["status"]
        == "reused"
    )
    with pytest.raises(CacheConflictError, match="--force"):
        train_behaviour_policies(
            "InvertedPendulum", tmp_path, seed=1, config=QUICK, final_eval_episodes=3
        )


def test_policy_file_round_trip_and_tamper_check(tmp_path):
    pol = LinearPolicy(np.arange(4.0).reshape(1, 4), np.ones(4), 2 * np.ones(4))
    pol.save(tmp_path / "p.npz")
    back = LinearPolicy.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(back(np.ones(4)), pol(np.ones(4)))
    train_behaviour_policies(
        "InvertedPendulum", tmp_path, seed=0, config=QUICK, final_eval_episodes=2
    )
    LinearPolicy(np.zeros((1, 4)), np.zeros(4), np.ones(4)).save(
        tmp_path / "InvertedPendulum" / "medium.npz"
    )
    with pytest.raises(ValueError, match="SHA-256"):
        load_policies("InvertedPendulum", tmp_path)


@pytest.mark.parametrize("name", ["InvertedPendulum", "HalfCheetah"])
def test_stored_policies_are_ordered(name):
    if not (POLICY_DIR / name / "policies.json").exists():
        pytest.skip(f"no stored policies for {name}")
    policies, record = load_policies(name)
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in policies]
    means = [record["levels"][lvl]["return_mean"] for lvl in order]
    assert all(a < b for a, b in zip(means, means[1:], strict=False))
    # re-evaluate the best and worst stored level on two fresh episodes
    hi = evaluate(f"{name}-v5", policies["expert"], [11, 12], horizon=1000)
    lo = evaluate(f"{name}-v5", policies[order[0]], [11, 12], horizon=1000)
    assert hi.mean() > lo.mean()


def test_default_configs_cover_every_environment():
    from pnc.data import ENVS

    assert set(DEFAULT_CONFIGS) == set(ENVS)
    with pytest.raises(ValueError):
        dataclasses.replace(QUICK, top_directions=5)
