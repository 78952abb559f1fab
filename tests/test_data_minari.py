"""Loading Minari datasets written by minari itself, and turning episodes into transitions."""

import gymnasium as gym
import minari
import numpy as np
import pytest
from minari.data_collector.episode_buffer import EpisodeBuffer

from pnc.studies.mujoco.data import (
    DatasetMissingError,
    DimensionMismatchError,
    NonFiniteDataError,
    UnknownEnvironmentError,
    env_spec,
    minari_io,
)
from pnc.studies.mujoco.data.envs import ENVS


def _random_buffers(gym_id, n_episodes, seed, max_steps=30):
    env = gym.make(gym_id, max_episode_steps=max_steps)
    env.action_space.seed(seed)
    buffers = []
    for i in range(n_episodes):
        obs, _ = env.reset(seed=seed + i)
        observations, actions, rewards, terms, truncs = [obs], [], [], [], []
        while True:
            a = env.action_space.sample()
            obs, r, te, tr, _ = env.step(a)
            observations.append(obs)
            actions.append(a)
            rewards.append(r)
            terms.append(te)
            truncs.append(tr)
            if te or tr:
                break
        buffers.append(
            EpisodeBuffer(
                id=i,
                observations=np.asarray(observations),
                actions=np.asarray(actions),
                rewards=rewards,
                terminations=terms,
                truncations=truncs,
            )
        )
    return env, buffers


@pytest.fixture
def minari_root(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path


def test_minari_written_dataset_loads_and_transitions_match_episodes(minari_root):
    env, buffers = _random_buffers("InvertedPendulum-v5", 4, seed=3)
    minari.create_dataset_from_buffers(
        "mujoco/invertedpendulum/expert-v0", buffers, env=env, algorithm_name="random"
    )
    episodes = minari_io.load_episodes(
        "mujoco/invertedpendulum/expert-v0", root=minari_root, download=False
    )
    assert [len(e) for e in episodes] == [len(b.rewards) for b in buffers]
    x, y, index = minari_io.transitions(episodes)
    assert x.shape == (sum(len(b.rewards) for b in buffers), 5) and y.shape == (len(x), 4)
    row = 0
    for i, b in enumerate(buffers):
        obs, act = np.asarray(b.observations), np.asarray(b.actions)
        t = len(act)
        np.testing.assert_allclose(x[row : row + t, :4], obs[:-1])
        np.testing.assert_allclose(x[row : row + t, 4:], act.reshape(t, -1), rtol=1e-6)
        np.testing.assert_allclose(y[row : row + t], obs[1:] - obs[:-1])
        assert np.all(index[row : row + t] == i)
        row += t
    # no transition pairs the last state of one episode with the first of the next
    last_of_first = np.asarray(buffers[0].observations)[-1]
    assert not np.any(np.all(np.isclose(x[:, :4], last_of_first), axis=1))


def test_missing_dataset_without_download_explains_the_fixes(tmp_path):
    with pytest.raises(DatasetMissingError) as err:
        minari_io.load_dataset("mujoco/hopper/expert-v0", root=tmp_path, download=False)
    msg = str(err.value)
    assert "--download" in msg and "MINARI_DATASETS_PATH" in msg and "--source offline" in msg


def test_env_specs_match_gymnasium_and_minari_ids():
    assert len(ENVS) == 11
    for name in ("InvertedPendulum", "HalfCheetah", "Reacher"):
        spec = env_spec(name)
        env = gym.make(spec.gym_id)
        assert env.observation_space.shape == (spec.obs_dim,)
        assert env.action_space.shape == (spec.act_dim,)
    hc, ip = env_spec("HalfCheetah"), env_spec("InvertedPendulum-v5")
    assert hc.minari_ids == {
        "expert": "mujoco/halfcheetah/expert-v0",
        "medium": "mujoco/halfcheetah/medium-v0",
        "simple": "mujoco/halfcheetah/simple-v0",
    }
    assert ip.has_mid is False and set(ip.minari_ids) == {"expert", "medium"}
    assert {n for n in ENVS if env_spec(n).has_mid} == {
        "HalfCheetah",
        "Hopper",
        "Walker2d",
        "Ant",
        "Humanoid",
        "HumanoidStandup",
    }


def test_unknown_environment_lists_valid_ones():
    with pytest.raises(UnknownEnvironmentError, match="InvertedDoublePendulum"):
        env_spec("CartPole")


def test_non_finite_values_are_counted_and_rejected():
    obs = np.zeros((4, 3))
    obs[2, 1] = np.nan
    obs[3, 0] = np.inf
    ep = minari_io.Episode(obs, np.zeros((3, 1)), np.zeros(3), np.zeros(3, bool), np.zeros(3, bool))
    clean = minari_io.Episode(
        np.zeros((4, 3)), np.zeros((3, 1)), np.zeros(3), np.zeros(3, bool), np.zeros(3, bool)
    )
    with pytest.raises(NonFiniteDataError, match="2 non-finite observation values"):
        minari_io.check_finite("d", [ep])
    # the message names the dataset and the offending episode
    with pytest.raises(
        NonFiniteDataError, match=r"^ds/x-v0: .*1 of 3 episodes \(episode index 2\)"
    ):
        minari_io.check_finite("ds/x-v0", [clean, clean, ep])


def test_dimension_mismatch_between_levels_is_reported():
    with pytest.raises(DimensionMismatchError, match="obs=4"):
        minari_io.check_dims({"a/expert-v0": (4, 1), "a/medium-v0": (5, 1)})


def test_downloaded_files_are_checked_against_the_remote_listing(tmp_path):
    """Size, then the SHA-256 of an LFS file or the git blob id of another; a missing file is
    named; files that agree give no problem."""
    import hashlib

    (tmp_path / "data").mkdir()
    big, small = b"\x00\x01" * 500, b'{"a": 1}'
    (tmp_path / "data/main_data.hdf5").write_bytes(big)
    (tmp_path / "data/metadata.json").write_bytes(small)
    git = hashlib.sha1(b"blob %d\0" % len(small) + small).hexdigest()
    listing = {
        "data/main_data.hdf5": {"size": len(big), "sha256": hashlib.sha256(big).hexdigest()},
        "data/metadata.json": {"size": len(small), "git_oid": git},
    }
    assert minari_io.check_files(tmp_path, listing) == []
    (tmp_path / "data/main_data.hdf5").write_bytes(b"\x01" + big[1:])
    (tmp_path / "data/metadata.json").write_bytes(b'{"a": 2}')
    problems = minari_io.check_files(tmp_path, {**listing, "data/extra.bin": {"size": 1}})
    assert problems[0] == "data/extra.bin: missing"
    assert problems[1].startswith("data/main_data.hdf5: SHA-256 ")
    assert problems[1].endswith(f"the remote lists {listing['data/main_data.hdf5']['sha256']}")
    assert problems[2].startswith("data/metadata.json: git blob id ") and git in problems[2]
    (tmp_path / "data/main_data.hdf5").write_bytes(big[:10])
    assert minari_io.check_files(tmp_path, listing)[0] == (
        f"data/main_data.hdf5: 10 bytes, the remote lists {len(big)}"
    )


def test_the_remote_is_minaris_variable_or_its_default(monkeypatch):
    monkeypatch.delenv("MINARI_REMOTE", raising=False)
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert minari_io.describe_remote() == "hf://farama-minari at https://huggingface.co"
    monkeypatch.setenv("MINARI_REMOTE", "hf://mirror-org")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:8000/")
    assert minari_io.describe_remote() == "hf://mirror-org at http://127.0.0.1:8000"
    monkeypatch.setenv("MINARI_REMOTE", "gcp://bucket")
    assert minari_io.describe_remote() == "gcp://bucket"
    from minari.storage.remotes import DEFAULT_REMOTE

    assert minari_io.DEFAULT_REMOTE == DEFAULT_REMOTE


def test_a_namespace_another_job_creates_meanwhile_is_not_an_error(minari_root, monkeypatch):
    """Two jobs writing datasets of one namespace: both see it missing, the second one's
    ``create_namespace`` raises ``ValueError`` because the first made it."""
    import minari.namespace as ns

    real = ns.create_namespace
    calls = []

    def racing(namespace, *args, **kwargs):
        calls.append(namespace)
        real(namespace)  # the other job, between this job's check and its creation
        real(namespace, *args, **kwargs)  # raises: it exists now

    monkeypatch.setattr(ns, "create_namespace", racing)
    minari_io.ensure_namespace("pnc/halfcheetah/far-seed1-v0")
    assert calls == ["pnc/halfcheetah"]
    assert "pnc/halfcheetah" in ns.list_local_namespaces()
    minari_io.ensure_namespace("pnc/halfcheetah/far-seed0-v0")  # exists: nothing to do
    assert calls == ["pnc/halfcheetah"]
    minari_io.ensure_namespace("plain-v0")  # no namespace
    assert calls == ["pnc/halfcheetah"]


def test_a_namespace_that_cannot_be_created_is_an_error(minari_root, monkeypatch):
    import minari.namespace as ns

    def refusing(namespace, *args, **kwargs):
        raise ValueError(f"cannot create {namespace}")

    monkeypatch.setattr(ns, "create_namespace", refusing)
    with pytest.raises(ValueError, match="cannot create pnc/ant"):
        minari_io.ensure_namespace("pnc/ant/far-seed0-v0")
