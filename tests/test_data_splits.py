"""Splits: disjoint by episode, deterministic, cached without silent overwrites, clear errors."""

import json

import numpy as np
import pytest

from pnc.studies.mujoco.data import (
    SPLITS,
    CacheConflictError,
    DatasetMissingError,
    DimensionMismatchError,
    PoolSizeError,
    SplitConfig,
    UnknownEnvironmentError,
    build_splits,
    load_splits,
    minari_io,
)
from pnc.studies.mujoco.data.ars import ARSConfig
from pnc.studies.mujoco.data.ars_levels import train_behaviour_policies
from pnc.studies.mujoco.data.envs import env_spec
from pnc.studies.mujoco.data.far import collect_random_episodes, make_far_dataset
from pnc.studies.mujoco.data.offline import make_offline_datasets
from pnc.studies.mujoco.data.splits import load_split_episodes

QUICK = ARSConfig(
    iterations=10,
    n_directions=4,
    top_directions=2,
    step_size=0.03,
    noise=0.1,
    horizon=200,
    eval_every=2,
    eval_episodes=2,
)


POOL = SplitConfig(transitions_per_regime=300, id_transitions=200)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("data")
    policies = base / "policies"
    train_behaviour_policies(
        "InvertedPendulum", policies, seed=0, config=QUICK, final_eval_episodes=2
    )
    minari_root = base / "minari"
    summary = make_offline_datasets(
        "InvertedPendulum", root=minari_root, seed=0, n_transitions=1500, policies=policies
    )
    assert set(summary["levels"]) == {"expert", "medium"}
    for seed in (0, 1, 3, 4):  # Far data is generated fresh per seed
        make_far_dataset("InvertedPendulum", root=minari_root, n_transitions=400, seed=seed)
    return minari_root


def test_pools_sizes_targets_and_episode_disjoint_id_eval(root, tmp_path):
    manifest = build_splits(
        "InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=POOL
    )
    splits, loaded = load_splits(tmp_path)
    assert loaded["data_source"] == "offline" and "mid" not in splits
    assert list(splits) == [s for s in SPLITS if s != "mid"] == manifest["splits"]
    # pool sizes: 300 per regime, 10% of the ID pool as val, 200 ID evaluation rows
    assert manifest["counts"] == {"train": 270, "val": 30, "id": 200, "near": 300, "far": 300}
    for name, (x, y) in splits.items():
        assert x.dtype == np.float32 and y.dtype == np.float32
        assert x.shape[1] == 5 and y.shape[1] == 4 and len(x) == len(y) == manifest["counts"][name]
    episodes = load_split_episodes(tmp_path)
    pool = set(episodes["train"].tolist()) | set(episodes["val"].tolist())
    assert not pool & set(episodes["id"].tolist()), "ID evaluation shares episodes with training"
    # val rows are drawn from the pool's rows, not whole episodes
    assert set(episodes["val"].tolist()) & set(episodes["train"].tolist())
    # targets are absolute next states: the next row's state within an episode
    expert = minari_io.load_episodes(env_spec("InvertedPendulum").offline_ids["expert"], root=root)
    x, y = splits["id"]
    ep = episodes["id"][0]
    obs = expert[ep].observations.astype(np.float32)
    np.testing.assert_allclose(x[0, :4], obs[0], rtol=1e-6)
    np.testing.assert_allclose(y[0], obs[1], rtol=1e-6)
    # the pools are read episode by episode: ID rows are whole leading runs of their episodes
    for i in np.unique(episodes["id"])[:-1]:
        n = int(np.sum(episodes["id"] == i))
        assert n == len(expert[i]) or i == episodes["id"][-1]


def test_delta_targets(root, tmp_path):
    cfg = SplitConfig(transitions_per_regime=300, id_transitions=200, target="delta")
    build_splits(
        "InvertedPendulum", tmp_path / "d", source="offline", seed=0, root=root, config=cfg
    )
    build_splits(
        "InvertedPendulum", tmp_path / "n", source="offline", seed=0, root=root, config=POOL
    )
    delta, _ = load_splits(tmp_path / "d")
    nxt, _ = load_splits(tmp_path / "n")
    for s in delta:
        np.testing.assert_array_equal(delta[s][0], nxt[s][0])  # same rows
        np.testing.assert_allclose(delta[s][1], nxt[s][1] - nxt[s][0][:, :4], atol=1e-5)


def test_splits_deterministic_in_env_and_seed(root, tmp_path):
    kw = dict(source="offline", root=root, config=POOL)
    a = build_splits("InvertedPendulum", tmp_path / "a", seed=3, **kw)
    b = build_splits("InvertedPendulum", tmp_path / "b", seed=3, **kw)
    c = build_splits("InvertedPendulum", tmp_path / "c", seed=4, **kw)
    assert a["content_sha256"] == b["content_sha256"]
    assert a["content_sha256"]["train"] != c["content_sha256"]["train"]
    # Far data differ per seed (fresh rollouts)
    assert a["dataset_ids"]["far"] != c["dataset_ids"]["far"]
    assert a["content_sha256"]["far"] != c["content_sha256"]["far"]


def test_a_pool_larger_than_its_dataset_names_the_dataset_and_its_size(root, tmp_path):
    too_big = SplitConfig(transitions_per_regime=500, id_transitions=200)  # Far holds 400
    with pytest.raises(PoolSizeError, match=r"random-seed0-v0.*holds 400 transitions"):
        build_splits(
            "InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=too_big
        )
    no_room = SplitConfig(transitions_per_regime=300, id_transitions=1400)
    with pytest.raises(PoolSizeError, match=r"expert-v0.*episode-disjoint ID evaluation"):
        build_splits(
            "InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=no_room
        )
    assert not (tmp_path / "manifest.json").exists()
    with pytest.raises(ValueError, match="target"):
        SplitConfig(target="reward")


def test_cache_conflicts(root, tmp_path):
    cfg = POOL
    build_splits("InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=cfg)
    before = (tmp_path / "splits.npz").read_bytes()
    again = build_splits(
        "InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=cfg
    )
    assert again["status"] == "reused" and (tmp_path / "splits.npz").read_bytes() == before
    with pytest.raises(CacheConflictError, match="--force"):
        build_splits("InvertedPendulum", tmp_path, source="offline", seed=1, root=root, config=cfg)
    assert (tmp_path / "splits.npz").read_bytes() == before
    forced = build_splits(
        "InvertedPendulum", tmp_path, source="offline", seed=1, root=root, config=cfg, force=True
    )
    assert forced["status"] == "replaced"
    assert json.loads((tmp_path / "manifest.json").read_text())["seed"] == 1


def test_missing_minari_data_and_unknown_env(root, tmp_path):
    with pytest.raises(DatasetMissingError, match="--source offline"):
        build_splits("InvertedPendulum", tmp_path, source="minari", seed=0, root=root)
    with pytest.raises(DatasetMissingError, match="pnc.studies.mujoco.data.offline"):
        build_splits(
            "InvertedPendulum", tmp_path, source="offline", seed=0, root=tmp_path / "empty"
        )
    with pytest.raises(UnknownEnvironmentError, match="valid environments"):
        build_splits("Pendulum", tmp_path, source="offline", seed=0, root=root)
    assert not (tmp_path / "manifest.json").exists()


def test_missing_far_and_dimension_mismatch_between_levels(root, tmp_path):
    # a Far dataset from another environment under this environment's id
    import shutil

    local = tmp_path / "minari"
    shutil.copytree(root, local)
    far_id = env_spec("InvertedPendulum").far_id(0)
    shutil.rmtree(local / far_id)
    with pytest.raises(DatasetMissingError, match="pnc.studies.mujoco.data.far InvertedPendulum .*--seed 0"):
        build_splits(
            "InvertedPendulum", tmp_path / "out", source="offline", seed=0, root=local, config=POOL
        )
    episodes = collect_random_episodes("InvertedDoublePendulum", 400, seed=0)
    minari_io.write_dataset(
        far_id,
        episodes,
        gym_id="InvertedDoublePendulum-v5",
        root=local,
        provenance={},
        algorithm_name="random",
        description="wrong env",
    )
    with pytest.raises(DimensionMismatchError, match="obs=9"):
        build_splits(
            "InvertedPendulum", tmp_path / "out", source="offline", seed=0, root=local, config=POOL
        )
