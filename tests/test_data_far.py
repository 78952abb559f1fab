"""Far data: uniform-random actions within bounds, seeded resets, written and read back via Minari."""

import numpy as np
from scipy import stats

from pnc.studies.mujoco.data import minari_io
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.far import collect_random_episodes, make_far_dataset
from pnc.studies.mujoco.data.rollout import whole_episode_returns


def test_actions_in_bounds_and_uniform():
    episodes = collect_random_episodes("Reacher", 2000, seed=1)
    actions = np.concatenate([ep.actions for ep in episodes])
    assert actions.shape == (2000, 2)
    assert actions.min() >= -1.0 and actions.max() <= 1.0
    for j in range(actions.shape[1]):
        # Kolmogorov-Smirnov against U[-1, 1]
        assert stats.kstest(actions[:, j], "uniform", args=(-1.0, 2.0)).pvalue > 1e-3
    # a degenerate sampler (e.g. all zeros) fails the same test
    assert stats.kstest(actions[:, 0] * 0.5, "uniform", args=(-1.0, 2.0)).pvalue < 1e-3


def test_same_seed_same_data_other_seed_other_data():
    a = collect_random_episodes("InvertedPendulum", 300, seed=7)
    b = collect_random_episodes("InvertedPendulum", 300, seed=7)
    c = collect_random_episodes("InvertedPendulum", 300, seed=8)
    assert minari_io.episodes_hash(a) == minari_io.episodes_hash(b)
    assert minari_io.episodes_hash(a) != minari_io.episodes_hash(c)
    assert [ep.seed for ep in a] == [ep.seed for ep in b] != [ep.seed for ep in c]
    assert sum(len(ep) for ep in a) == 300
    assert a[-1].terminations[-1] or a[-1].truncations[-1]


def test_whole_episode_returns_leave_out_the_episode_the_budget_cut():
    episodes = collect_random_episodes("InvertedPendulum", 300, seed=7)
    assert len(episodes) > 1 and not episodes[-1].terminations[-1]  # the last one was cut
    returns = [ep.episode_return for ep in episodes]
    assert whole_episode_returns(episodes) == returns[:-1]
    assert whole_episode_returns(episodes, last_cut=False) == returns
    assert whole_episode_returns(episodes[:1]) == returns[:1]  # a lone episode is kept


def test_far_dataset_round_trip_and_reuse(tmp_path):
    first = make_far_dataset("InvertedPendulum", root=tmp_path, n_transitions=400, seed=0)
    assert first["status"] == "created"
    again = make_far_dataset("InvertedPendulum", root=tmp_path, n_transitions=400, seed=0)
    assert again["status"] == "reused"
    episodes = minari_io.load_episodes(env_spec("InvertedPendulum").far_id(0), root=tmp_path)
    assert sum(len(ep) for ep in episodes) == 400
    expected = collect_random_episodes("InvertedPendulum", 400, seed=0)
    x, y, _ = minari_io.transitions(episodes)
    x2, y2, _ = minari_io.transitions(expected)
    np.testing.assert_allclose(x, x2, rtol=1e-6)
    np.testing.assert_allclose(y, y2, rtol=1e-6)
    prov = minari_io.read_provenance(env_spec("InvertedPendulum").far_id(0), tmp_path)
    assert prov["request"]["seed"] == 0 and prov["content_sha256"] == minari_io.episodes_hash(
        expected
    )
