"""Train/val/ID/Near/Mid/Far splits per (environment, seed) (paper, Section 5.3 and Appendix C).

Expert episodes are shuffled by a generator named ``(env, seed, "splits")`` and divided *by
episode* into ``train``, ``val`` (held out for hyperparameter selection) and ``id`` (held-out ID
evaluation). ``near`` (medium level), ``mid`` (simple level, where the environment has one) and
``far`` (uniform-random actions) are evaluation-only. A split larger than its cap keeps a uniformly
drawn subset of its transitions (rows in their original order), which never mixes episodes between
splits.

The splits of one (env, seed) are cached as ``splits.npz`` (compressed, float32, no pickles) and
``manifest.json`` (source, dataset ids, counts, dims, content hashes, settings). An existing cache
is reused when its content matches and is replaced only with ``force``.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from pnc.data import minari_io
from pnc.data.envs import LEVEL_SPLIT, env_spec
from pnc.data.errors import CacheConflictError, DatasetMissingError
from pnc.data.rng import numpy_rng

#: All split names; ``mid`` is absent for environments without a ``simple`` level.
SPLITS: tuple[str, ...] = ("train", "val", "id", "near", "mid", "far")

SOURCES: tuple[str, ...] = ("minari", "offline")

MANIFEST = "manifest.json"
SPLITS_FILE = "splits.npz"


@dataclasses.dataclass(frozen=True)
class SplitConfig:
    """Split sizes.

    Attributes:
        val_fraction: fraction of expert episodes held out as ``val`` (at least one episode).
        id_fraction: fraction of expert episodes held out as ``id`` (at least one episode).
        max_train: cap on ``train`` transitions (``None``: no cap).
        max_val: cap on ``val`` transitions (``None``: ``max_eval``).
        max_eval: cap on each of ``id``, ``near``, ``mid``, ``far`` (and ``val``) transitions.
    """

    val_fraction: float = 0.1
    id_fraction: float = 0.1
    max_train: int | None = None
    max_val: int | None = None
    max_eval: int | None = None

    def __post_init__(self) -> None:
        if not (0 < self.val_fraction < 1 and 0 < self.id_fraction < 1):
            raise ValueError("val_fraction and id_fraction must lie in (0, 1)")
        if self.val_fraction + self.id_fraction >= 1:
            raise ValueError("val_fraction + id_fraction must leave episodes for training")
        for cap in (self.max_train, self.max_val, self.max_eval):
            if cap is not None and cap < 1:
                raise ValueError(f"caps must be positive, got {cap}")

    def cap(self, split: str) -> int | None:
        if split == "train":
            return self.max_train
        if split == "val" and self.max_val is not None:
            return self.max_val
        return self.max_eval


def _dataset_summary(dataset) -> dict[str, Any]:
    meta = dataset.storage.metadata
    keep = ("total_episodes", "total_steps", "algorithm_name", "author", "minari_version")
    out = {k: meta[k] for k in keep if k in meta}
    out = {k: sorted(v) if isinstance(v, set) else v for k, v in out.items()}
    for k in ("ref_min_score", "ref_max_score"):
        if k in meta:
            out[k] = float(meta[k])
    if minari_io.PROVENANCE_KEY in meta:
        out["provenance"] = meta[minari_io.PROVENANCE_KEY]
    return out


def _missing_hint(source: str, level: str, name: str) -> str:
    if level == "far":
        return f"generate it with `python -m pnc.data.far {name} --minari-root DIR --transitions N --seed S`"
    if source == "offline":
        return (
            f"generate it with `python -m pnc.data.offline {name} --minari-root DIR "
            "--transitions N --seed S`"
        )
    return ""


def _load_level(dataset_id: str, *, root, download: bool, source: str, level: str, name: str):
    try:
        # generated datasets never come from Minari's remote storage
        generated = level == "far" or source == "offline"
        dataset = minari_io.load_dataset(dataset_id, root=root, download=download and not generated)
    except DatasetMissingError as err:
        hint = _missing_hint(source, level, name)
        if hint:
            raise DatasetMissingError(
                f"dataset {dataset_id!r} not found under {minari_io.resolve_root(root)}; {hint}"
            ) from err
        raise
    episodes = minari_io.read_episodes(dataset)
    if not episodes:
        raise ValueError(f"dataset {dataset_id!r} has no episodes")
    minari_io.check_finite(dataset_id, episodes)
    return episodes, _dataset_summary(dataset)


def _take(episodes, chosen: np.ndarray, cap: int | None, rng: np.random.Generator):
    """Transitions of ``episodes[chosen]``, uniformly subsampled to ``cap`` rows if needed."""
    x, y, index = minari_io.transitions([episodes[i] for i in chosen])
    episode = chosen[index]
    if cap is not None and len(x) > cap:
        rows = np.sort(rng.choice(len(x), size=cap, replace=False))
        x, y, episode = x[rows], y[rows], episode[rows]
    return x.astype(np.float32), y.astype(np.float32), episode.astype(np.int64)


def make_splits(
    name: str,
    *,
    source: str,
    seed: int,
    root=None,
    download: bool = False,
    config: SplitConfig | None = None,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], dict[str, Any]]:
    """Compute the splits of ``(name, seed)`` from the datasets of ``source`` (no files written).

    Returns:
        ``(splits, info)``: ``splits[split] = (x float32 [N, obs + act], y float32 [N, obs],
        episode int64 [N])``, ``episode`` the row's episode index in its source dataset; ``info``
        the manifest fields except hashes.

    Raises:
        UnknownEnvironmentError, DatasetMissingError, DimensionMismatchError, NonFiniteDataError.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown data source {source!r}; expected one of {SOURCES}")
    spec = env_spec(name)
    config = config or SplitConfig()
    ids = dict(spec.dataset_ids(source))
    ids["far"] = spec.far_id
    loaded = {
        level: _load_level(
            dataset_id, root=root, download=download, source=source, level=level, name=spec.name
        )
        for level, dataset_id in ids.items()
    }
    dims = {
        ids[level]: minari_io.episode_dims(ids[level], episodes)
        for level, (episodes, _) in loaded.items()
    }
    obs_dim, act_dim = minari_io.check_dims(dims)

    expert = loaded["expert"][0]
    n_ep = len(expert)
    n_val = max(1, round(config.val_fraction * n_ep))
    n_id = max(1, round(config.id_fraction * n_ep))
    if n_ep - n_val - n_id < 1:
        raise ValueError(
            f"{ids['expert']} has {n_ep} episodes; need at least 3 to split train/val/id by episode"
        )
    perm = numpy_rng(spec.name, seed, "splits", "episodes").permutation(n_ep)
    chosen = {
        "val": np.sort(perm[:n_val]),
        "id": np.sort(perm[n_val : n_val + n_id]),
        "train": np.sort(perm[n_val + n_id :]),
    }
    splits = {}
    for split in ("train", "val", "id"):
        rng = numpy_rng(spec.name, seed, "splits", split, "cap")
        splits[split] = _take(expert, chosen[split], config.cap(split), rng)
    for level in spec.levels[1:] + ("far",):
        split = LEVEL_SPLIT.get(level, level)
        episodes = loaded[level][0]
        rng = numpy_rng(spec.name, seed, "splits", split, "cap")
        splits[split] = _take(episodes, np.arange(len(episodes)), config.cap(split), rng)
    order = [s for s in SPLITS if s in splits]
    split_sources = {"train": "expert", "val": "expert", "id": "expert", "near": "medium"}
    split_sources.update({"mid": "simple", "far": "far"})
    info = {
        "env": spec.name,
        "gym_id": spec.gym_id,
        "seed": int(seed),
        "data_source": source,
        "dataset_ids": {level: ids[level] for level in ids},
        "split_dataset": {s: ids[split_sources[s]] for s in order},
        "splits": order,
        "dims": {"obs": obs_dim, "act": act_dim, "x": obs_dim + act_dim, "y": obs_dim},
        "counts": {s: int(len(splits[s][0])) for s in order},
        "episodes": {s: int(len(np.unique(splits[s][2]))) for s in order},
        "expert_episodes": {"total": n_ep, "train": len(chosen["train"]), "val": n_val, "id": n_id},
        "config": dataclasses.asdict(config),
        "datasets": {ids[level]: summary for level, (_, summary) in loaded.items()},
        "transition": "x = concat(s_t, a_t), y = s_{t+1} - s_t, within episodes only",
    }
    return splits, info


def _split_hashes(splits) -> dict[str, str]:
    return {s: minari_io.content_hash(x, y) for s, (x, y, _) in splits.items()}


def _npz_bytes(splits) -> bytes:
    arrays = {}
    for s, (x, y, episode) in splits.items():
        arrays[f"{s}_x"], arrays[f"{s}_y"], arrays[f"{s}_episode"] = x, y, episode
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def build_splits(
    name: str,
    out: str | Path,
    *,
    source: str,
    seed: int,
    root=None,
    download: bool = False,
    config: SplitConfig | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Build (or reuse) ``out/splits.npz`` and ``out/manifest.json`` and return the manifest.

    The manifest's ``status`` is ``"created"``, ``"reused"`` (an existing cache with the same
    content is kept untouched) or ``"replaced"`` (different content, only with ``force``).

    Raises:
        CacheConflictError: ``out`` holds splits with different content and ``force`` is false.
    """
    out = Path(out)
    splits, info = make_splits(
        name, source=source, seed=seed, root=root, download=download, config=config
    )
    manifest = dict(info, content_sha256=_split_hashes(splits))
    manifest_path, npz_path = out / MANIFEST, out / SPLITS_FILE
    status = "created"
    if manifest_path.exists() or npz_path.exists():
        old = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        same = (
            npz_path.exists()
            and old.get("content_sha256") == manifest["content_sha256"]
            and old.get("splits_file_sha256") == minari_io.file_sha256(npz_path)
        )
        if same:
            return dict(old, status="reused")
        if not force:
            raise CacheConflictError(
                f"{out} already holds splits with different content (or an incomplete cache); "
                "pass --force to replace them"
            )
        status = "replaced"
    out.mkdir(parents=True, exist_ok=True)
    payload = _npz_bytes(splits)
    npz_path.write_bytes(payload)
    manifest["splits_file_sha256"] = minari_io.file_sha256(npz_path)
    manifest_path.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return dict(manifest, status=status)


def load_splits(
    directory: str | Path,
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
    """Read the splits written by :func:`build_splits`.

    Returns:
        ``(splits, manifest)``: ``splits[name] = (x float32 [N, obs + act], y float32 [N, obs])`` for
        ``name`` in ``manifest["splits"]`` (``mid`` absent where the environment has none);
        ``manifest["data_source"]`` is ``"minari"`` or ``"offline"``.

    Raises:
        FileNotFoundError: no cache in ``directory``.
        ValueError: ``splits.npz`` does not match the hash recorded in the manifest.
    """
    directory = Path(directory)
    manifest_path, npz_path = directory / MANIFEST, directory / SPLITS_FILE
    if not manifest_path.exists() or not npz_path.exists():
        raise FileNotFoundError(
            f"no splits in {directory}; build them with "
            f"`python -m pnc.data ENV --source minari|offline --seed S --out {directory}`"
        )
    manifest = json.loads(manifest_path.read_text())
    if minari_io.file_sha256(npz_path) != manifest.get("splits_file_sha256"):
        raise ValueError(
            f"{npz_path} does not match the hash in {manifest_path}; rebuild the splits: in the "
            f"workflow `snakemake --forcerun {directory.as_posix()}/manifest.json`, by hand "
            "`python -m pnc.data ... --force`"
        )
    with np.load(npz_path, allow_pickle=False) as z:
        splits = {s: (z[f"{s}_x"], z[f"{s}_y"]) for s in manifest["splits"]}
    return splits, manifest


def load_split_episodes(directory: str | Path) -> dict[str, np.ndarray]:
    """Per split, the source-dataset episode index of every row (``int64 [N]``)."""
    directory = Path(directory)
    manifest = json.loads((directory / MANIFEST).read_text())
    with np.load(directory / SPLITS_FILE, allow_pickle=False) as z:
        return {s: z[f"{s}_episode"] for s in manifest["splits"]}
