"""ARS (pnc.studies.mujoco.data.ars) and the ARS behaviour levels (pnc.studies.mujoco.data.ars_levels, pnc.studies.mujoco.data.level_selection):
learning on InvertedPendulum-v5, level ordering under the data's action noise, re-selection without
training, resuming from a training state, the worker pool, stored copies, the command line
(pnc.studies.mujoco.data.behaviour)."""

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from pnc.studies.mujoco.data import ENVS, CacheConflictError, behaviour
from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.ars import (
    ARSConfig,
    Checkpoint,
    LinearPolicy,
    StateMismatchError,
    evaluate,
    load_checkpoints,
    load_training_state,
    train_ars,
)
from pnc.studies.mujoco.data.ars_levels import reselect_behaviour_policies, train_behaviour_policies
from pnc.studies.mujoco.data.behaviour_settings import DEFAULT_CONFIGS
from pnc.studies.mujoco.data.level_selection import select_levels
from pnc.studies.mujoco.data.offline import rollout_policy
from pnc.studies.mujoco.data.policy_store import POLICY_DIR, load_policies

REPO = Path(__file__).resolve().parents[1]

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


@pytest.mark.slow
def test_ars_improves_inverted_pendulum_quickly():
    checkpoints, info = train_ars(
        "InvertedPendulum", QUICK, seed=0, action_noise=action_noise_for("InvertedPendulum")
    )
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


def test_noisy_evaluation_is_seeded_and_differs_from_deterministic():
    pol = LinearPolicy(np.array([[1.0, 5.0, 0.5, 1.0]]), np.zeros(4), np.ones(4))
    seeds = [3, 4]
    det = evaluate("InvertedPendulum-v5", pol, seeds, horizon=200)
    noisy = [
        evaluate(
            "InvertedPendulum-v5",
            pol,
            seeds,
            horizon=200,
            action_noise=0.5,
            noise_rng=np.random.default_rng(7),
        )
        for _ in range(2)
    ]
    np.testing.assert_array_equal(noisy[0], noisy[1])
    assert not np.array_equal(det, noisy[0])
    with pytest.raises(ValueError, match="noise_rng"):
        evaluate("InvertedPendulum-v5", pol, seeds, horizon=10, action_noise=0.1)
    with pytest.raises(ValueError, match="non-negative"):
        evaluate("InvertedPendulum-v5", pol, seeds, horizon=10, action_noise=-0.1)


def _fake_checkpoints(returns, stds=None):
    pol = LinearPolicy(np.zeros((1, 4)), np.zeros(4), np.ones(4))
    stds = stds or [0.0] * len(returns)
    return [
        Checkpoint(2 * i, 100 * i, float(r), pol, float(s))
        for i, (r, s) in enumerate(zip(returns, stds, strict=True))
    ]


def test_select_levels_never_picks_the_untrained_policy():
    config = ARSConfig(medium_fraction=0.5, simple_fraction=0.1)
    # targets: medium 50, simple 10; the untrained checkpoint (return 0) is nearest to 10
    chosen = select_levels(
        _fake_checkpoints([0, 30, 55, 100, 90]), ["expert", "medium", "simple"], config
    )
    assert [chosen[lvl].iteration for lvl in ("simple", "medium", "expert")] == [2, 4, 6]
    # an erratic checkpoint (mean on target, large spread) loses to a consistent one near it,
    # and the expert is the best reliable return, not the best mean
    erratic = _fake_checkpoints([0, 10, 50, 58, 120, 100], [0, 1, 40, 2, 60, 5])
    chosen = select_levels(erratic, ["expert", "medium"], config)
    assert chosen["expert"].iteration == 10 and chosen["medium"].iteration == 6
    with pytest.raises(RuntimeError, match="no trained checkpoint"):
        select_levels(_fake_checkpoints([0, 100, 50]), ["expert", "medium"], config)


def test_reselection_reproduces_training_and_follows_the_action_noise(tmp_path):
    trained = train_behaviour_policies(
        "InvertedPendulum", tmp_path, seed=0, config=QUICK, final_eval_episodes=3
    )
    assert trained["request"]["action_noise"] == action_noise_for("InvertedPendulum")
    directory = tmp_path / "InvertedPendulum"
    stored = load_checkpoints(directory / "checkpoints.npz")
    assert [c.iteration for c in stored] == [c[0] for c in trained["learning_curve"]]
    same = reselect_behaviour_policies("InvertedPendulum", tmp_path)
    assert same["levels"] == trained["levels"]
    assert same["reselected_from"] == [trained["request"]]
    assert same["learning_curve"] == trained["learning_curve"]
    other = reselect_behaviour_policies("InvertedPendulum", tmp_path, action_noise=0.4)
    assert other["request"]["action_noise"] == 0.4
    assert other["learning_curve"] != trained["learning_curve"]
    again = train_behaviour_policies(
        "InvertedPendulum", tmp_path, seed=0, config=QUICK, action_noise=0.4, final_eval_episodes=3
    )
    assert again["status"] == "reused"
    (directory / "checkpoints.npz").write_bytes(b"tampered")
    with pytest.raises(ValueError, match="SHA-256"):
        reselect_behaviour_policies("InvertedPendulum", tmp_path)


def _offline_envs() -> list[str]:
    """The environments ``config/offline.yaml`` studies: their stored policies must exist."""
    with open(REPO / "config" / "offline.yaml") as f:
        return list(yaml.safe_load(f)["envs"])


def test_every_environment_of_the_offline_study_has_stored_policies():
    envs = _offline_envs()
    assert envs and set(envs) <= set(ENVS)
    missing = [name for name in envs if not (POLICY_DIR / name / "policies.json").exists()]
    assert not missing, f"config/offline.yaml lists environments without stored policies: {missing}"


@pytest.mark.parametrize("name", ENVS)
def test_stored_policies_are_ordered_under_the_data_action_noise(name):
    if not (POLICY_DIR / name / "policies.json").exists():
        # only environments the offline study leaves out may lack policies; a missing directory
        # of a listed one fails here (and in the test above)
        assert name not in _offline_envs(), f"no stored policies for {name}"
        pytest.skip(f"{name} is not in config/offline.yaml and has no stored policies")
    policies, record = load_policies(name)
    noise = action_noise_for(name)
    assert noise > 0
    assert record["request"]["action_noise"] == noise
    order = [lvl for lvl in ("simple", "medium", "expert") if lvl in policies]
    means = [record["levels"][lvl]["return_mean"] for lvl in order]
    assert record["ordered_by_return"]
    assert all(a < b for a, b in zip(means, means[1:], strict=False))
    # roll every level out the way the offline datasets are, on fresh seeds
    rolled = [
        np.mean(
            [
                ep.episode_return
                for ep in rollout_policy(
                    name, policies[lvl], seed=99, level=lvl, n_episodes=3, action_noise=noise
                )
            ]
        )
        for lvl in order
    ]
    assert all(a < b for a, b in zip(rolled, rolled[1:], strict=False)), rolled


def test_default_configs_cover_every_environment():
    assert set(DEFAULT_CONFIGS) == set(ENVS)
    with pytest.raises(ValueError):
        dataclasses.replace(QUICK, top_directions=5)


@pytest.mark.parametrize("name", ["Hopper", "Reacher"])
def test_command_line_reuses_stored_levels_and_writes_nothing(name, tmp_path, capsys):
    """``python -m pnc.studies.mujoco.data.behaviour ENV --out DIR`` on a copy of the stored levels (ARS: Hopper,
    scripted controllers: Reacher) finds them made by the same request and leaves every file."""
    shutil.copytree(POLICY_DIR / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()}
    assert behaviour.main([name, "--out", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "reused"
    assert summary["action_noise"] == action_noise_for(name)
    assert (
        summary["levels"] == json.loads((POLICY_DIR / name / "policies.json").read_text())["levels"]
    )
    assert {p.name: p.read_bytes() for p in (tmp_path / name).iterdir()} == before


def test_behaviour_module_is_only_the_command_line():
    """The behaviour policies' names live in the modules that define them; the command-line
    module re-exports none of them."""
    from pnc.studies.mujoco.data import (
        ars_levels,
        behaviour_settings,
        controller_levels,
        level_selection,
        policy_store,
    )

    assert behaviour.__all__ == ["main"]
    homes = (ars_levels, behaviour_settings, controller_levels, level_selection, policy_store)
    for name in ("REWARD_SHIFT", "POLICY_DIR", "load_policies", "select_levels"):
        assert any(hasattr(m, name) for m in homes), name
        assert not hasattr(behaviour, name), name


RESUME = dataclasses.replace(QUICK, iterations=6, horizon=100, eval_episodes=2)


class _Interrupt(Exception):
    pass


def _interrupt_at(iteration):
    def log(message):
        if message.startswith(f"iter {iteration:4d}"):
            raise _Interrupt(message)

    return log


def _same_checkpoints(a, b):
    assert [(c.iteration, c.timesteps, c.eval_return, c.eval_std) for c in a] == [
        (c.iteration, c.timesteps, c.eval_return, c.eval_std) for c in b
    ]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.policy.matrix, y.policy.matrix)
        np.testing.assert_array_equal(x.policy.obs_mean, y.policy.obs_mean)
        np.testing.assert_array_equal(x.policy.obs_std, y.policy.obs_std)


@pytest.mark.slow
def test_resumed_run_equals_the_uninterrupted_run(tmp_path):
    kwargs = {"action_noise": 0.1, "reward_shift": 0.5}
    full, full_info = train_ars("InvertedPendulum", RESUME, 0, **kwargs)
    state = tmp_path / "state.npz"
    # interrupted after evaluating iteration 4: the last state on disk is iteration 2's
    with pytest.raises(_Interrupt):
        train_ars(
            "InvertedPendulum",
            RESUME,
            0,
            state_path=state,
            save_every=2,
            log=_interrupt_at(4),
            **kwargs,
        )
    saved = load_training_state(state)
    assert saved.iteration == 2 and [c.iteration for c in saved.checkpoints] == [0, 2]
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically, no temporary left
    resumed, info = train_ars(
        "InvertedPendulum", RESUME, 0, state_path=state, save_every=2, **kwargs
    )
    assert info["resumed"] and info["iterations"] == RESUME.iterations
    assert info["timesteps"] == full_info["timesteps"]
    _same_checkpoints(resumed, full)
    # a finished state resumed again trains nothing and returns the same checkpoints
    again, again_info = train_ars("InvertedPendulum", RESUME, 0, state_path=state, **kwargs)
    _same_checkpoints(again, full)
    assert again_info["timesteps"] == full_info["timesteps"]


def test_resume_refuses_other_settings(tmp_path):
    state = tmp_path / "state.npz"
    short = dataclasses.replace(RESUME, iterations=2)
    train_ars("InvertedPendulum", short, 0, action_noise=0.1, state_path=state)
    with pytest.raises(StateMismatchError, match=r"ars\.step_size"):
        train_ars(
            "InvertedPendulum",
            dataclasses.replace(short, step_size=0.5),
            0,
            action_noise=0.1,
            state_path=state,
        )
    with pytest.raises(StateMismatchError, match="seed"):
        train_ars("InvertedPendulum", short, 1, action_noise=0.1, state_path=state)
    with pytest.raises(StateMismatchError, match="action_noise"):
        train_ars("InvertedPendulum", short, 0, action_noise=0.2, state_path=state)
    with pytest.raises(StateMismatchError, match="past"):
        train_ars(
            "InvertedPendulum",
            dataclasses.replace(short, iterations=1),
            0,
            action_noise=0.1,
            state_path=state,
        )
    (tmp_path / "other.npz").write_bytes(b"not a state")
    with pytest.raises(ValueError):
        train_ars("InvertedPendulum", short, 0, action_noise=0.1, state_path=tmp_path / "other.npz")


@pytest.mark.slow
def test_worker_pool_gives_the_same_run():
    config = dataclasses.replace(RESUME, iterations=2)
    one, _ = train_ars("InvertedPendulum", config, 0, action_noise=0.1)
    two, _ = train_ars("InvertedPendulum", config, 0, action_noise=0.1, workers=2)
    _same_checkpoints(one, two)
