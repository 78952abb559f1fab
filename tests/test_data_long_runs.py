"""Humanoid runs: level-order refusal, policy-file checks before any rollout, resumable pieces."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import pytest

from pnc.studies.mujoco.data import long_runs, offline, shift
from pnc.studies.mujoco.data.ars import Checkpoint, LinearPolicy, TrainingState, save_training_state
from pnc.studies.mujoco.data.behaviour_settings import DEFAULT_CONFIGS
from pnc.studies.mujoco.data.minari_io import file_sha256
from pnc.studies.mujoco.data.policy_checks import (
    PolicyMismatchError,
    check_policy_dims,
    load_checked_policies,
)
from pnc.studies.mujoco.data.policy_store import load_policies


def _policy(obs: int, act: int, value: float = 0.0) -> LinearPolicy:
    return LinearPolicy(np.full((act, obs), value), np.zeros(obs), np.ones(obs))


def _store(root, env: str, policy: LinearPolicy, levels=("expert", "medium", "simple")):
    directory = root / env
    directory.mkdir(parents=True)
    record = {"request": {"action_noise": 0.1}, "levels": {}}
    for level in levels:
        policy.save(directory / f"{level}.npz")
        record["levels"][level] = {
            "file": f"{level}.npz",
            "sha256": file_sha256(directory / f"{level}.npz"),
        }
    (directory / "policies.json").write_text(json.dumps(record))
    return directory


def test_level_order_accepts_ordered_and_names_the_unordered_level():
    long_runs.check_level_order({"expert": 300.0, "medium": 200.0, "simple": 100.0})
    long_runs.check_level_order({"expert": 300.0, "medium": 200.0})
    with pytest.raises(long_runs.LevelOrderError, match="medium level's return is not below"):
        long_runs.check_level_order({"expert": 300.0, "medium": 300.0, "simple": 100.0})
    with pytest.raises(long_runs.LevelOrderError, match="simple level"):
        long_runs.check_level_order({"expert": 300.0, "medium": 200.0, "simple": 250.0})
    with pytest.raises(ValueError, match="expected expert"):
        long_runs.check_level_order({"medium": 1.0, "simple": 0.0})


def test_policy_of_another_observation_size_is_refused_naming_the_file(tmp_path):
    check_policy_dims("Humanoid", _policy(348, 17), tmp_path / "ok.npz")
    with pytest.raises(PolicyMismatchError, match="ant.npz.*observations of size 348"):
        check_policy_dims("Humanoid", _policy(105, 8), tmp_path / "ant.npz")
    # right matrix, wrong normaliser
    bad = LinearPolicy(np.zeros((17, 348)), np.zeros(105), np.ones(105))
    with pytest.raises(PolicyMismatchError, match="obs_mean"):
        check_policy_dims("HumanoidStandup", bad, tmp_path / "x.npz")


def test_stored_files_are_checked_before_any_rollout(tmp_path, monkeypatch):
    def no_rollout(*args, **kwargs):
        raise AssertionError("rolled out before the policy files were checked")

    monkeypatch.setattr(offline, "rollout_policy", no_rollout)
    # an Ant policy stored, with a matching hash, as Humanoid's
    wrong_size = tmp_path / "size"
    _store(wrong_size, "Humanoid", _policy(105, 8))
    with pytest.raises(PolicyMismatchError, match=r"Humanoid/expert\.npz"):
        load_checked_policies("Humanoid", wrong_size)
    with pytest.raises(PolicyMismatchError, match=r"Humanoid/expert\.npz"):
        shift.behaviour_shift("Humanoid", policies=wrong_size)
    with pytest.raises(PolicyMismatchError, match=r"Humanoid/expert\.npz"):
        offline.make_offline_datasets(
            "Humanoid", seed=0, root=tmp_path / "minari", policies=wrong_size
        )
    # right sizes, but a file changed after its hash was recorded
    tampered = tmp_path / "hash"
    directory = _store(tampered, "HumanoidStandup", _policy(348, 17))
    _policy(348, 17, 0.5).save(directory / "medium.npz")
    with pytest.raises(ValueError, match=r"HumanoidStandup/medium\.npz does not match the SHA-256"):
        load_checked_policies("HumanoidStandup", tampered)
    with pytest.raises(ValueError, match=r"medium\.npz does not match the SHA-256"):
        shift.behaviour_shift("HumanoidStandup", policies=tampered)
    # a correct store loads
    good = tmp_path / "good"
    _store(good, "Humanoid", _policy(348, 17))
    loaded, _ = load_checked_policies("Humanoid", good)
    assert set(loaded) == set(load_policies("Humanoid", good)[0]) == {"expert", "medium", "simple"}


def _fake_state(path, returns, value=0.0):
    config = DEFAULT_CONFIGS["Humanoid"]
    cks = [
        Checkpoint(10 * i, 1000 * i, float(r), _policy(348, 17, value), 1.0)
        for i, r in enumerate(returns)
    ]
    save_training_state(
        path,
        TrainingState(
            settings={
                "env": "Humanoid",
                "seed": 0,
                "ars": dataclasses.asdict(config),
                "action_noise": 0.1,
                "reward_shift": 0.0,
            },
            iteration=cks[-1].iteration,
            timesteps=cks[-1].timesteps,
            matrix=cks[-1].policy.matrix,
            stats_count=0,
            stats_sum=np.zeros(348),
            stats_sum_sq=np.zeros(348),
            rng_states={},
            checkpoints=cks,
        ),
    )


@pytest.mark.parametrize(
    "picks", [None, {"expert": (40, 1.0), "medium": (20, 1.0), "simple": (10, 1.0)}]
)
def test_store_refuses_unordered_levels_and_writes_nothing(tmp_path, monkeypatch, picks):
    state = tmp_path / "run" / "state.npz"
    # the training evaluations look ordered, but every checkpoint is the same policy: the fresh
    # returns on the same episodes are equal, so the levels are refused, whether selected from
    # the returns (picks None) or named in CHECKPOINT_LEVELS
    _fake_state(state, [100.0, 120.0, 150.0, 200.0, 300.0])
    monkeypatch.delitem(long_runs.GAIN_LEVELS, "Humanoid", raising=False)
    if picks is None:
        monkeypatch.delitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", raising=False)
    else:
        monkeypatch.setitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", picks)
    out = tmp_path / "policies"
    with pytest.raises(long_runs.LevelOrderError, match="not below"):
        long_runs.store_long_run("Humanoid", out, state_path=state, final_eval_episodes=2)
    assert not out.exists()
    assert long_runs.main(["store", "Humanoid", "--out", str(out), "--state", str(state)]) == 2
    assert not out.exists()


def test_only_the_humanoid_environments_have_long_runs():
    with pytest.raises(ValueError, match="Hopper has no long run"):
        long_runs.run_dir("Hopper")


@pytest.mark.slow
def test_training_resumes_in_pieces_with_cpu_time_and_curve(tmp_path):
    state = tmp_path / "state.npz"
    first = long_runs.train_long_run("Humanoid", iterations=1, state_path=state)
    assert first["iterations"] == 1 and not first["resumed"]
    second = long_runs.train_long_run("Humanoid", iterations=2, state_path=state)
    assert second["resumed"] and second["iterations"] == 2
    progress = json.loads((tmp_path / "progress.json").read_text())
    assert [p["from_iteration"] for p in progress["pieces"]] == [0, 1]
    assert progress["cpu_seconds_total"] > 0
    with (tmp_path / "learning_curve.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2]  # the last of every piece


@pytest.mark.parametrize("name", ["Humanoid", "HumanoidStandup"])
def test_committed_long_run_states_resume_with_todays_settings(name):
    """The committed state of each long run was made with the settings its training command uses
    today (DEFAULT_CONFIGS, the reward shift, the data's action noise, seed 0), so
    `scripts/train_behaviour.sh` resumes it instead of refusing it."""
    from pnc.studies.mujoco.data import ars
    from pnc.studies.mujoco.data.action_noise import action_noise_for

    path = long_runs.run_dir(name) / "state.npz"
    state = ars.load_training_state(path)
    wanted = {
        "env": name,
        "seed": 0,
        "ars": dataclasses.asdict(DEFAULT_CONFIGS[name]),
        "action_noise": action_noise_for(name),
        "reward_shift": long_runs.TRAIN_REWARD_SHIFT[name],
    }
    ars._check_resumable(path, state.settings, wanted, state.iteration)
    curve = (path.parent / "learning_curve.csv").read_text().splitlines()
    assert int(curve[-1].split(",")[0]) <= state.iteration


def test_scale_gains_multiplies_the_matrix_and_keeps_the_normalisation():
    from pnc.studies.mujoco.data.level_selection import scale_gains

    rng = np.random.default_rng(0)
    policy = LinearPolicy(rng.normal(size=(17, 348)), rng.normal(size=348), 1.0 + rng.random(348))
    obs = rng.normal(size=348)
    scaled = scale_gains(policy, 0.25)
    np.testing.assert_allclose(scaled(obs), 0.25 * policy(obs))
    np.testing.assert_array_equal(scaled.obs_mean, policy.obs_mean)
    np.testing.assert_array_equal(scaled.obs_std, policy.obs_std)
    np.testing.assert_array_equal(scale_gains(policy, 1.0).matrix, policy.matrix)
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="gain"):
            scale_gains(policy, bad)


def test_gain_levels_derive_every_level_from_one_checkpoint():
    from pnc.studies.mujoco.data.level_selection import gain_levels

    cks = [Checkpoint(10 * i, 100 * i, float(i), _policy(348, 17, 1.0 + i), 0.5) for i in range(4)]
    levels = gain_levels(cks, 20, {"expert": 0.5, "medium": 0.2, "simple": 0.1})
    assert list(levels) == ["expert", "medium", "simple"]
    for lvl, gain in (("expert", 0.5), ("medium", 0.2), ("simple", 0.1)):
        assert levels[lvl].iteration == 20 and levels[lvl].eval_return == cks[2].eval_return
        np.testing.assert_allclose(levels[lvl].policy.matrix, gain * cks[2].policy.matrix)
    np.testing.assert_array_equal(cks[2].policy.matrix, 3.0)  # the checkpoint itself is unchanged
    with pytest.raises(ValueError, match="no checkpoint at iteration 15"):
        gain_levels(cks, 15, {"expert": 0.5})
    with pytest.raises(ValueError, match="decrease"):
        gain_levels(cks, 20, {"expert": 0.2, "medium": 0.5})


def _evaluation_by_gain(env, ck, **kwargs):
    """A stand-in for the levels' evaluation: the return grows with the level's gain (its
    matrix's first entry, the fake states' matrices being all ones)."""
    gain = float(ck.policy.matrix.flat[0])
    return {
        "iteration": ck.iteration,
        "timesteps": ck.timesteps,
        "train_eval_return": ck.eval_return,
        "train_eval_std": ck.eval_std,
        "return_mean": 1000.0 * gain,
        "return_std": 0.0,
        "deterministic_return_mean": 1000.0 * gain,
    }


def test_store_of_gain_levels_records_the_gains(tmp_path, monkeypatch):
    state = tmp_path / "run" / "state.npz"
    _fake_state(state, [100.0, 120.0, 150.0], value=1.0)  # every matrix all ones
    gains = {"expert": 0.5, "medium": 0.2, "simple": 0.1}
    monkeypatch.setitem(long_runs.GAIN_LEVELS, "Humanoid", (10, gains))
    monkeypatch.delitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", raising=False)

    monkeypatch.setattr(long_runs, "level_evaluation", _evaluation_by_gain)
    out = tmp_path / "policies"
    record = long_runs.store_long_run("Humanoid", out, state_path=state)
    assert record["request"]["gain_levels"] == {"iteration": 10, "gains": gains}
    assert "gain_levels" in record["selection"]
    loaded, _ = load_checked_policies("Humanoid", out)
    for lvl, gain in gains.items():
        assert record["levels"][lvl]["gain"] == gain and record["levels"][lvl]["iteration"] == 10
        np.testing.assert_allclose(loaded[lvl].matrix, gain)

    # gains that do not decrease with the level, or miss a level, are refused; nothing is written
    for bad, match in (
        ({"expert": 0.5, "medium": 0.6, "simple": 0.1}, "decrease"),
        ({"expert": 0.5, "medium": 0.2}, "not for the levels"),
    ):
        monkeypatch.setitem(long_runs.GAIN_LEVELS, "Humanoid", (10, bad))
        with pytest.raises(ValueError, match=match):
            long_runs.store_long_run("Humanoid", tmp_path / "other", state_path=state)
        assert not (tmp_path / "other").exists()


def test_humanoidstandup_levels_are_stored_as_gains_of_one_checkpoint():
    from pnc.studies.mujoco.data.behaviour_settings import GAIN_LEVELS
    from pnc.studies.mujoco.data.level_selection import scale_gains

    loaded, record = load_checked_policies("HumanoidStandup")
    iteration, gains = GAIN_LEVELS["HumanoidStandup"]
    assert record["request"]["gain_levels"] == {"iteration": iteration, "gains": gains}
    state = long_runs.run_dir("HumanoidStandup") / "state.npz"
    from pnc.studies.mujoco.data.ars import load_training_state

    base = next(c for c in load_training_state(state).checkpoints if c.iteration == iteration)
    returns = {lvl: record["levels"][lvl]["return_mean"] for lvl in loaded}
    long_runs.check_level_order(returns)
    for lvl, policy in loaded.items():
        np.testing.assert_array_equal(policy.matrix, scale_gains(base.policy, gains[lvl]).matrix)


def test_checkpoint_levels_take_each_level_from_its_own_checkpoint_and_gain():
    from pnc.studies.mujoco.data.level_selection import checkpoint_levels

    cks = [Checkpoint(10 * i, 100 * i, float(i), _policy(348, 17, 1.0 + i), 0.5) for i in range(5)]
    picks = {"expert": (40, 0.8), "medium": (20, 0.5), "simple": (10, 1.0)}
    levels = checkpoint_levels(cks, picks)
    assert list(levels) == ["expert", "medium", "simple"]
    for lvl, (it, gain) in picks.items():
        base = cks[it // 10]
        assert levels[lvl].iteration == it and levels[lvl].eval_return == base.eval_return
        np.testing.assert_allclose(levels[lvl].policy.matrix, gain * base.policy.matrix)
    np.testing.assert_array_equal(cks[4].policy.matrix, 5.0)  # the checkpoint itself is unchanged
    for bad, match in (
        ({"expert": (40, 0.8), "medium": (40, 0.5)}, "increase from simple to expert"),
        ({"expert": (20, 0.8), "medium": (40, 0.5)}, "increase from simple to expert"),
        ({"expert": (40, 0.8), "simple": (0, 1.0)}, "trained checkpoint"),
        ({"expert": (45, 0.8), "simple": (10, 1.0)}, "no checkpoint at iteration 45"),
        ({"expert": (40, 1.5)}, "gain"),
        ({"medium": (20, 0.5)}, "expected expert"),
    ):
        with pytest.raises(ValueError, match=match):
            checkpoint_levels(cks, bad)


def test_store_of_checkpoint_levels_records_each_levels_iteration_and_gain(tmp_path, monkeypatch):
    state = tmp_path / "run" / "state.npz"
    _fake_state(state, [100.0, 120.0, 150.0, 200.0], value=1.0)  # every matrix all ones
    picks = {"expert": (30, 0.8), "medium": (20, 0.6), "simple": (10, 0.4)}
    monkeypatch.delitem(long_runs.GAIN_LEVELS, "Humanoid", raising=False)
    monkeypatch.setitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", picks)

    monkeypatch.setattr(long_runs, "level_evaluation", _evaluation_by_gain)
    out = tmp_path / "policies"
    record = long_runs.store_long_run("Humanoid", out, state_path=state)
    assert record["request"]["checkpoint_levels"] == {
        lvl: {"iteration": it, "gain": gain} for lvl, (it, gain) in picks.items()
    }
    assert record["request"]["gain_levels"] is None
    assert "checkpoint_levels" in record["selection"]
    loaded, _ = load_checked_policies("Humanoid", out)
    for lvl, (it, gain) in picks.items():
        assert record["levels"][lvl]["iteration"] == it and record["levels"][lvl]["gain"] == gain
        np.testing.assert_allclose(loaded[lvl].matrix, gain)

    # a missing level, or an entry in both settings, is refused; nothing is written
    monkeypatch.setitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", {"expert": (30, 0.8)})
    with pytest.raises(ValueError, match="not for the levels"):
        long_runs.store_long_run("Humanoid", tmp_path / "other", state_path=state)
    monkeypatch.setitem(long_runs.CHECKPOINT_LEVELS, "Humanoid", picks)
    monkeypatch.setitem(long_runs.GAIN_LEVELS, "Humanoid", (10, {"expert": 1.0}))
    with pytest.raises(ValueError, match="both GAIN_LEVELS and CHECKPOINT_LEVELS"):
        long_runs.store_long_run("Humanoid", tmp_path / "other", state_path=state)
    assert not (tmp_path / "other").exists()


def test_humanoid_levels_are_stored_from_their_named_checkpoints_and_gains():
    from pnc.studies.mujoco.data.ars import load_training_state
    from pnc.studies.mujoco.data.behaviour_settings import CHECKPOINT_LEVELS
    from pnc.studies.mujoco.data.level_selection import scale_gains

    loaded, record = load_checked_policies("Humanoid")
    picks = CHECKPOINT_LEVELS["Humanoid"]
    assert record["request"]["checkpoint_levels"] == {
        lvl: {"iteration": it, "gain": gain} for lvl, (it, gain) in picks.items()
    }
    state = load_training_state(long_runs.run_dir("Humanoid") / "state.npz")
    by_iteration = {c.iteration: c for c in state.checkpoints}
    long_runs.check_level_order({lvl: record["levels"][lvl]["return_mean"] for lvl in loaded})
    for lvl, policy in loaded.items():
        it, gain = picks[lvl]
        assert record["levels"][lvl]["iteration"] == it and record["levels"][lvl]["gain"] == gain
        want = scale_gains(by_iteration[it].policy, gain)
        np.testing.assert_array_equal(policy.matrix, want.matrix)
        np.testing.assert_array_equal(policy.obs_mean, want.obs_mean)
