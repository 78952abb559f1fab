"""Splits: disjoint by episode, deterministic, cached without silent overwrites, clear errors."""

import json

import numpy as np
import pytest

from pnc.data import (
    SPLITS,
    CacheConflictError,
    DatasetMissingError,
    DimensionMismatchError,
    SplitConfig,
    UnknownEnvironmentError,
    build_splits,
    load_splits,
    minari_io,
)
from pnc.data.ars import ARSConfig
from pnc.data.behaviour import train_behaviour_policies
from pnc.data.envs import env_spec
from pnc.data.far import collect_random_episodes, make_far_dataset
from pnc.data.offline import make_offline_datasets
from pnc.data.splits import load_split_episodes

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


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    base = tmp_path_factory.mktemp("data")
    policies = base / "policies"
    train_behaviour_policies(
        "InvertedPendulum", policies, seed=0, config=QUICK, final_eval_episodes=2
    )
    minari_root = base / "minari"
    summary = make_offline_datasets(
        "InvertedPendulum", root=minari_root, seed=0, n_episodes=12, policies=policies
    )
    assert set(summary["levels"]) == {"expert", "medium"}
    make_far_dataset("InvertedPendulum", root=minari_root, n_transitions=600, seed=0)
    return minari_root


def test_splits_disjoint_by_episode_and_complete(root, tmp_path):
    manifest = build_splits("InvertedPendulum", tmp_path, source="offline", seed=0, root=root)
    splits, loaded = load_splits(tmp_path)
    assert loaded["data_source"] == "offline" and "mid" not in splits
    assert list(splits) == [s for s in SPLITS if s != "mid"] == manifest["splits"]
    for name, (x, y) in splits.items():
        assert x.dtype == np.float32 and y.dtype == np.float32
        assert x.shape[1] == 5 and y.shape[1] == 4 and len(x) == len(y) == manifest["counts"][name]
    episodes = load_split_episodes(tmp_path)
    sets = [set(episodes[s].tolist()) for s in ("train", "val", "id")]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    assert len(sets[0] | sets[1] | sets[2]) == 12
    # train/val/id rows are exactly the expert transitions of their episodes
    expert = minari_io.load_episodes(env_spec("InvertedPendulum").offline_ids["expert"], root=root)
    for s in ("train", "val", "id"):
        x, y, _ = minari_io.transitions(
            [expert[i] for i in sorted(sets[("train", "val", "id").index(s)])]
        )
        np.testing.assert_allclose(splits[s][0], x.astype(np.float32))
        np.testing.assert_allclose(splits[s][1], y.astype(np.float32))


def test_splits_deterministic_in_env_and_seed(root, tmp_path):
    a = build_splits("InvertedPendulum", tmp_path / "a", source="offline", seed=3, root=root)
    b = build_splits("InvertedPendulum", tmp_path / "b", source="offline", seed=3, root=root)
    c = build_splits("InvertedPendulum", tmp_path / "c", source="offline", seed=4, root=root)
    assert a["content_sha256"] == b["content_sha256"]
    assert a["content_sha256"]["train"] != c["content_sha256"]["train"]


def test_caps_and_cache_conflicts(root, tmp_path):
    cfg = SplitConfig(max_train=500, max_eval=100)
    m = build_splits("InvertedPendulum", tmp_path, source="offline", seed=0, root=root, config=cfg)
    assert m["counts"]["train"] == 500 and m["counts"]["far"] == 100 and m["counts"]["near"] == 100
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
    with pytest.raises(DatasetMissingError, match="pnc.data.offline"):
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
    far_id = env_spec("InvertedPendulum").far_id
    shutil.rmtree(local / far_id)
    with pytest.raises(DatasetMissingError, match="pnc.data.far"):
        build_splits("InvertedPendulum", tmp_path / "out", source="offline", seed=0, root=local)
    episodes = collect_random_episodes("InvertedDoublePendulum", 50, seed=0)
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
        build_splits("InvertedPendulum", tmp_path / "out", source="offline", seed=0, root=local)
