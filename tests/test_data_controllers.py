"""Scripted controllers (pnc.studies.mujoco.data.controllers), policy kinds (pnc.studies.mujoco.data.policy), the controller levels
of the store (pnc.studies.mujoco.data.controller_levels) and the behaviour-shift measure (pnc.studies.mujoco.data.shift)."""

import json

import numpy as np
import pytest

from pnc.studies.mujoco.data import CacheConflictError
from pnc.studies.mujoco.data.action_noise import action_noise_for
from pnc.studies.mujoco.data.ars import LinearPolicy
from pnc.studies.mujoco.data.behaviour_settings import CONTROLLER_LEVELS
from pnc.studies.mujoco.data.controller_levels import build_controller_policies
from pnc.studies.mujoco.data.controllers import PARAMETERS, ScriptedController
from pnc.studies.mujoco.data.offline import rollout_policy
from pnc.studies.mujoco.data.policy import (
    evaluate_policy,
    load_policy,
    policy_kind,
    total_action_noise,
)
from pnc.studies.mujoco.data.policy_store import POLICY_DIR, load_policies
from pnc.studies.mujoco.data.shift import mahalanobis_to

EXPERT = CONTROLLER_LEVELS["Reacher"]["expert"][0]


def test_controller_round_trip_and_kind_checks(tmp_path):
    pol = ScriptedController.from_dict("Reacher", EXPERT, 0.2)
    pol.save(tmp_path / "c.npz")
    back = load_policy(tmp_path / "c.npz", "controller")
    assert back == pol and policy_kind(back) == "controller"
    obs = np.array([0.9, 0.8, 0.3, -0.6, 0.1, -0.05, 0.2, -0.1, 0.02, 0.03])
    np.testing.assert_array_equal(back(obs), pol(obs))
    LinearPolicy(np.ones((2, 10)), np.zeros(10), np.ones(10)).save(tmp_path / "l.npz")
    assert policy_kind(load_policy(tmp_path / "l.npz")) == "linear"
    with pytest.raises(ValueError, match="expected 'linear'"):
        load_policy(tmp_path / "c.npz", "linear")
    with pytest.raises(ValueError, match="expected 'controller'"):
        load_policy(tmp_path / "l.npz", "controller")
    with pytest.raises(ValueError, match="unknown policy kind"):
        load_policy(tmp_path / "c.npz", "neural")
    with pytest.raises(ValueError, match="not a scripted controller"):
        ScriptedController.load(tmp_path / "l.npz")


def test_controller_rejects_bad_parameters():
    with pytest.raises(ValueError, match="no scripted controller"):
        ScriptedController("Hopper", (1.0,))
    with pytest.raises(ValueError, match="needs 6 parameters"):
        ScriptedController("Reacher", (1.0, 2.0))
    with pytest.raises(ValueError, match="missing"):
        ScriptedController.from_dict("Reacher", {"kp": 1.0})
    with pytest.raises(ValueError, match="finite"):
        ScriptedController("Reacher", (np.nan, 0, 0, 0, 0, 0))
    with pytest.raises(ValueError, match="action_noise"):
        ScriptedController("Reacher", (1.0, 0, 0, 0, 0, 0), -0.1)


def test_total_action_noise_adds_in_quadrature():
    lin = LinearPolicy(np.zeros((1, 4)), np.zeros(4), np.ones(4))
    assert total_action_noise(lin, 0.1) == 0.1
    ctl = ScriptedController.from_dict("Reacher", EXPERT, 0.4)
    assert total_action_noise(ctl, 0.3) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        total_action_noise(lin, -0.1)


def test_jacobian_matches_finite_differences():
    kin = ScriptedController.from_dict("Reacher", EXPERT).kinematics
    q = np.array([0.7, -1.1])
    _, jac = kin.jacobian(q)
    eps = 1e-6
    num = np.stack(
        [
            (kin.jacobian(q + eps * e)[0] - kin.jacobian(q - eps * e)[0]) / (2 * eps)
            for e in np.eye(2)
        ],
        axis=1,
    )
    np.testing.assert_allclose(jac, num, atol=1e-7)
    assert kin.links == pytest.approx((0.1, 0.11))


def test_expert_controller_reaches_the_target():
    import gymnasium as gym

    pol = ScriptedController.from_dict("Reacher", EXPERT)
    env = gym.make("Reacher-v5")
    final = []
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        start = np.linalg.norm(obs[8:10])
        for _ in range(50):
            obs, *_ = env.step(np.clip(pol(obs), -1, 1).astype(np.float32))
        final.append(np.linalg.norm(obs[8:10]) / start)
    env.close()
    # the fingertip ends far closer to the target than it started, on every reset
    assert max(final) < 0.5 and np.median(final) < 0.1, final


def test_controller_levels_are_built_reused_and_checked(tmp_path):
    levels = CONTROLLER_LEVELS["Reacher"]
    record = build_controller_policies("Reacher", tmp_path, final_eval_episodes=4)
    assert record["status"] == "built" and record["kind"] == "controller"
    assert set(record["levels"]) == set(levels)
    assert record["ordered_by_return"]
    loaded, stored = load_policies("Reacher", tmp_path)
    assert set(loaded) == {"expert", "medium"}  # Reacher has no Mid split
    assert loaded["medium"] == ScriptedController.from_dict("Reacher", *levels["medium"])
    assert stored == json.loads((tmp_path / "Reacher" / "policies.json").read_text())
    again = build_controller_policies("Reacher", tmp_path, final_eval_episodes=4)
    assert again["status"] == "reused"
    with pytest.raises(CacheConflictError, match="--force"):
        build_controller_policies("Reacher", tmp_path, final_eval_episodes=5)
    ScriptedController.from_dict("Reacher", EXPERT).save(tmp_path / "Reacher" / "medium.npz")
    with pytest.raises(ValueError, match="SHA-256"):
        load_policies("Reacher", tmp_path)
    with pytest.raises(ValueError, match="no scripted-controller levels"):
        build_controller_policies("Hopper", tmp_path)


@pytest.mark.parametrize(("name", "margin"), [("Reacher", 5.0), ("Pusher", 10.0)])
def test_stored_controller_levels_are_ordered_with_the_untrained_policy(name, margin):
    policies, record = load_policies(name)
    assert record["kind"] == "controller"
    assert all(isinstance(p, ScriptedController) for p in policies.values())
    means = {lvl: info["return_mean"] for lvl, info in record["levels"].items()}
    assert means["simple"] < means["medium"] < means["expert"]
    # the expert is far better than doing nothing
    assert means["expert"] - record["zero_policy_return_mean"] > margin
    for level, (params, own) in CONTROLLER_LEVELS[name].items():
        stored = load_policy(POLICY_DIR / name / f"{level}.npz", "controller")
        assert stored == ScriptedController.from_dict(name, params, own)
    assert set(PARAMETERS) == set(CONTROLLER_LEVELS)


PUSHER = CONTROLLER_LEVELS["Pusher"]["expert"][0]


def _pusher_observations(n: int = 30) -> list[np.ndarray]:
    import gymnasium as gym

    pol = ScriptedController.from_dict("Pusher", PUSHER)
    env = gym.make("Pusher-v5")
    obs, _ = env.reset(seed=7)
    seen = [obs]
    for _ in range(n):
        obs, *_ = env.step(np.clip(pol(obs), -2, 2).astype(np.float32))
        seen.append(obs)
    env.close()
    return seen


def test_pusher_controller_is_a_function_of_the_observation(tmp_path):
    first, *_, last = _pusher_observations()
    pol = ScriptedController.from_dict("Pusher", PUSHER, 0.1)
    a_first, a_last = pol(first), pol(last)
    assert a_first.shape == (7,) and np.all(np.isfinite(a_first))
    assert not np.allclose(a_first, a_last)
    # no memory: the same observation gives the same command after others, and in a fresh copy
    np.testing.assert_array_equal(pol(last), a_last)
    np.testing.assert_array_equal(pol(first), a_first)
    pol.save(tmp_path / "p.npz")
    np.testing.assert_array_equal(load_policy(tmp_path / "p.npz", "controller")(last), a_last)
    # the torque stays within its norm limit; zero gains command nothing
    assert np.linalg.norm(a_first) <= PUSHER["tau_max"] + 1e-9
    zero = ScriptedController.from_dict("Pusher", {k: 0.0 for k in PUSHER})
    np.testing.assert_array_equal(zero(first), np.zeros(7))


def test_pusher_jacobians_match_finite_differences():
    kin = ScriptedController.from_dict("Pusher", PUSHER).kinematics
    q = np.array([0.3, 0.8, -0.7, -1.2, 0.4, -0.5, 0.6])
    _, rot, jacp, jacr = kin.frame(q)
    eps = 1e-6
    num_p, num_r = [], []
    for e in np.eye(7):
        (xp, rp, *_), (xm, rm, *_) = kin.frame(q + eps * e), kin.frame(q - eps * e)
        num_p.append((xp - xm) / (2 * eps))
        # angular velocity from dR R^T = [w]x
        w = (rp - rm) / (2 * eps) @ rot.T
        num_r.append([w[2, 1], w[0, 2], w[1, 0]])
    np.testing.assert_allclose(jacp, np.array(num_p).T, atol=1e-6)
    np.testing.assert_allclose(jacr, np.array(num_r).T, atol=1e-6)
    inertia = kin.inertia(q)
    np.testing.assert_allclose(inertia, inertia.T)
    assert np.all(np.linalg.eigvalsh(inertia) > 0)


def test_pusher_expert_pushes_the_object_to_the_goal():
    import gymnasium as gym

    pol = ScriptedController.from_dict("Pusher", PUSHER)
    env = gym.make("Pusher-v5")
    ratios, gaps = [], []
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        start = np.linalg.norm(obs[17:19] - obs[20:22])
        for t in range(100):
            obs, *_ = env.step(np.clip(pol(obs), -2, 2).astype(np.float32))
            if t >= 80:
                gaps.append(np.linalg.norm(obs[14:17] - obs[17:20]))
        ratios.append(np.linalg.norm(obs[17:19] - obs[20:22]) / start)
    env.close()
    # the object ends much closer to the goal on every reset, with the fingertip at it
    assert max(ratios) < 0.7 and np.median(ratios) < 0.55, ratios
    assert max(gaps) < 0.03, max(gaps)


def test_controller_rollouts_are_seeded():
    pol = ScriptedController.from_dict("Reacher", *CONTROLLER_LEVELS["Reacher"]["medium"])
    noise = action_noise_for("Reacher")
    a = rollout_policy(
        "Reacher", pol, seed=3, level="medium", n_transitions=120, action_noise=noise
    )
    b = rollout_policy(
        "Reacher", pol, seed=3, level="medium", n_transitions=120, action_noise=noise
    )
    assert sum(len(ep) for ep in a) == 120
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.observations, y.observations)
    r1 = evaluate_policy("Reacher", pol, seed=0, purpose="t", episodes=2, action_noise=noise)
    r2 = evaluate_policy("Reacher", pol, seed=0, purpose="t", episodes=2, action_noise=noise)
    np.testing.assert_array_equal(r1, r2)


def test_mahalanobis_distance():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((20000, 3)) * [1.0, 2.0, 0.5] + [1.0, 0.0, -1.0]
    d = mahalanobis_to(ref, np.array([[1.0, 0.0, -1.0], [1.0, 4.0, -1.0], [1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(d, [0.0, 2.0, 2.0], atol=0.05)
    # fresh draws from the reference sit near sqrt(d); shifted ones further out
    fresh = mahalanobis_to(ref, rng.standard_normal((5000, 3)) * [1.0, 2.0, 0.5] + [1, 0, -1])
    assert abs(np.mean(fresh**2) - 3.0) < 0.2
    with pytest.raises(ValueError):
        mahalanobis_to(ref, np.zeros((2, 4)))


def test_offline_datasets_roll_out_the_stored_controllers(tmp_path):
    from pnc.studies.mujoco.data import minari_io
    from pnc.studies.mujoco.data.offline import make_offline_datasets

    summary = make_offline_datasets("Reacher", root=tmp_path, seed=0, n_transitions=500)
    assert set(summary["levels"]) == {"expert", "medium"}
    assert all(info["transitions"] == 500 for info in summary["levels"].values())
    assert summary["ordered_by_return"]
    provenance = minari_io.read_provenance("pnc-offline/reacher/medium-v0", tmp_path)
    assert provenance["policy"]["kind"] == "controller"
    record = json.loads((POLICY_DIR / "Reacher" / "policies.json").read_text())
    assert provenance["policy"]["sha256"] == record["levels"]["medium"]["sha256"]
    again = make_offline_datasets("Reacher", root=tmp_path, seed=0, n_transitions=500)
    assert {info["status"] for info in again["levels"].values()} == {"reused"}
