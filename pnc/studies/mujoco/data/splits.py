"""Train/val/ID/Near/Mid/Far splits per (environment, seed) (paper, Section 5.3 and Appendix C).

Each regime contributes a pool of ``transitions_per_regime`` transitions (the authors' 10,000),
read episode by episode from its dataset's episodes in an order shuffled by a generator named
``(env, seed, "splits", regime)``; the last episode is cut so the pool has exactly that many rows.

- ``train`` / ``val``: the ID (expert) pool, of which a random ``val_fraction`` of the rows (a
  permutation named ``(env, seed, "splits", "val")``) is held out for early stopping, variance
  calibration and hyperparameter selection (the authors' 10% of the ID-train pool);
- ``id``: the next ``id_transitions`` expert transitions in the same shuffled order, from episodes
  the train pool does not touch (episode-disjoint held-out ID evaluation; the authors drew it with
  another seed from the same dataset, so theirs could overlap the training rows);
- ``near`` (medium level), ``mid`` (simple level, where the environment has one) and ``far``
  (uniform-random actions, a dataset generated fresh per seed, :mod:`pnc.studies.mujoco.data.far`): their pools.

Inputs are ``x = (s_t, a_t)``; targets ``y`` are the absolute next state ``s_{t+1}`` (the authors'
``target="next_state"``) or the change ``s_{t+1} - s_t`` (``"delta"``), in raw units.

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

from pnc.studies.mujoco.data import minari_io
from pnc.studies.mujoco.data.envs import LEVEL_SPLIT, env_spec
from pnc.studies.mujoco.data.errors import CacheConflictError, DatasetMissingError
from pnc.studies.mujoco.data.rng import numpy_rng

#: All split names; ``mid`` is absent for environments without a ``simple`` level.
SPLITS: tuple[str, ...] = ("train", "val", "id", "near", "mid", "far")

SOURCES: tuple[str, ...] = ("minari", "offline")

TARGETS: tuple[str, ...] = minari_io.TARGETS

MANIFEST = "manifest.json"
SPLITS_FILE = "splits.npz"


class PoolSizeError(ValueError):
    """A dataset holds fewer transitions than its pool asks for (the message names both)."""


@dataclasses.dataclass(frozen=True)
class SplitConfig:
    """Pool sizes and the target.

    Attributes:
        transitions_per_regime: rows of each regime's pool (ID train + val, Near, Mid, Far).
        val_fraction: fraction of the ID pool's rows held out as ``val`` (at least one row).
        id_transitions: rows of the ``id`` evaluation split (``None``: ``transitions_per_regime``).
        target: ``"next_state"`` (``s_{t+1}``) or ``"delta"`` (``s_{t+1} - s_t``).
    """

    transitions_per_regime: int = 10_000
    val_fraction: float = 0.1
    id_transitions: int | None = None
    target: str = "next_state"

    def __post_init__(self) -> None:
        if self.transitions_per_regime < 2:
            raise ValueError(
                f"transitions_per_regime must be >= 2, got {self.transitions_per_regime}"
            )
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction}")
        if self.id_transitions is not None and self.id_transitions < 1:
            raise ValueError(f"id_transitions must be >= 1, got {self.id_transitions}")
        if self.target not in TARGETS:
            raise ValueError(f"unknown target {self.target!r}; expected one of {TARGETS}")

    @property
    def n_id(self) -> int:
        return self.transitions_per_regime if self.id_transitions is None else self.id_transitions

    @property
    def n_val(self) -> int:
        return max(1, round(self.val_fraction * self.transitions_per_regime))


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


def _missing_hint(source: str, level: str, name: str, seed: int) -> str:
    if level == "far":
        return (
            f"generate it with `python -m pnc.studies.mujoco.data.far {name} --minari-root DIR --transitions N "
            f"--seed {seed}`"
        )
    if source == "offline":
        return (
            f"generate it with `python -m pnc.studies.mujoco.data.offline {name} --minari-root DIR "
            "--transitions N --seed S`"
        )
    return ""


def _load_level(
    dataset_id: str, *, root, download: bool, source: str, level: str, name: str, seed: int
):
    try:
        # generated datasets never come from Minari's remote storage
        generated = level == "far" or source == "offline"
        dataset = minari_io.load_dataset(dataset_id, root=root, download=download and not generated)
    except DatasetMissingError as err:
        hint = _missing_hint(source, level, name, seed)
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


def _read_pool(
    episodes, order: np.ndarray, n_rows: int, target: str
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
    """The first ``n_rows`` transitions of ``episodes`` taken in ``order`` (last episode cut).

    Returns:
        ``((x float32, y float32, episode int64), k)``; ``k`` episodes of ``order`` were used.
    """
    xs, ys, eps, total, k = [], [], [], 0, 0
    for i in order:
        if total >= n_rows:
            break
        x, y = minari_io.episode_transitions(episodes[i], target)
        take = min(len(x), n_rows - total)
        xs.append(x[:take])
        ys.append(y[:take])
        eps.append(np.full(take, i, np.int64))
        total += take
        k += 1
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.float32)
    return (x, y, np.concatenate(eps)), k


def _check_size(dataset_id: str, episodes, needed: int, what: str) -> None:
    held = int(sum(len(ep) for ep in episodes))
    if held < needed:
        raise PoolSizeError(
            f"dataset {dataset_id!r} holds {held} transitions ({len(episodes)} episodes); "
            f"{what} needs {needed}. Lower data.transitions_per_regime (or data.id_transitions), "
            "or provide a larger dataset (offline source: raise data.offline_transitions)"
        )


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
        UnknownEnvironmentError, DatasetMissingError, DimensionMismatchError, NonFiniteDataError,
        PoolSizeError (a dataset smaller than its pool).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown data source {source!r}; expected one of {SOURCES}")
    spec = env_spec(name)
    config = config or SplitConfig()
    ids = dict(spec.dataset_ids(source))
    ids["far"] = spec.far_id(seed)
    loaded = {
        level: _load_level(
            dataset_id,
            root=root,
            download=download,
            source=source,
            level=level,
            name=spec.name,
            seed=seed,
        )
        for level, dataset_id in ids.items()
    }
    dims = {
        ids[level]: minari_io.episode_dims(ids[level], episodes)
        for level, (episodes, _) in loaded.items()
    }
    obs_dim, act_dim = minari_io.check_dims(dims)

    pool = config.transitions_per_regime
    target = config.target
    expert = loaded["expert"][0]
    order = numpy_rng(spec.name, seed, "splits", "expert", "episodes").permutation(len(expert))
    _check_size(ids["expert"], expert, pool, "the ID pool (transitions_per_regime)")
    (x, y, episode), used = _read_pool(expert, order, pool, target)
    rest = order[used:]
    if sum(len(expert[i]) for i in rest) < config.n_id:
        raise PoolSizeError(
            f"dataset {ids['expert']!r} holds {int(sum(len(ep) for ep in expert))} transitions "
            f"({len(expert)} episodes); the ID pool takes {pool} (from {used} episodes), leaving "
            f"{int(sum(len(expert[i]) for i in rest))} in untouched episodes for the "
            f"{config.n_id} episode-disjoint ID evaluation rows. Lower data.transitions_per_regime "
            "or data.id_transitions, or provide a larger dataset (offline source: raise "
            "data.offline_transitions)"
        )
    perm = numpy_rng(spec.name, seed, "splits", "val").permutation(pool)
    val_rows, train_rows = np.sort(perm[: config.n_val]), np.sort(perm[config.n_val :])
    splits = {
        "train": (x[train_rows], y[train_rows], episode[train_rows]),
        "val": (x[val_rows], y[val_rows], episode[val_rows]),
        "id": _read_pool(expert, rest, config.n_id, target)[0],
    }
    for level in spec.levels[1:] + ("far",):
        split = LEVEL_SPLIT.get(level, level)
        episodes = loaded[level][0]
        _check_size(ids[level], episodes, pool, f"the {split} pool (transitions_per_regime)")
        level_order = numpy_rng(spec.name, seed, "splits", level, "episodes").permutation(
            len(episodes)
        )
        splits[split] = _read_pool(episodes, level_order, pool, target)[0]
    order_names = [s for s in SPLITS if s in splits]
    split_sources = {"train": "expert", "val": "expert", "id": "expert", "near": "medium"}
    split_sources.update({"mid": "simple", "far": "far"})
    info = {
        "env": spec.name,
        "gym_id": spec.gym_id,
        "seed": int(seed),
        "data_source": source,
        "dataset_ids": {level: ids[level] for level in ids},
        "split_dataset": {s: ids[split_sources[s]] for s in order_names},
        "splits": order_names,
        "dims": {"obs": obs_dim, "act": act_dim, "x": obs_dim + act_dim, "y": obs_dim},
        "counts": {s: int(len(splits[s][0])) for s in order_names},
        "episodes": {s: int(len(np.unique(splits[s][2]))) for s in order_names},
        "expert_episodes": {"total": len(expert), "id_pool": int(used)},
        "config": dataclasses.asdict(config),
        "datasets": {ids[level]: summary for level, (_, summary) in loaded.items()},
        "transition": (
            "x = concat(s_t, a_t), y = "
            + ("s_{t+1}" if target == "next_state" else "s_{t+1} - s_t")
            + ", within episodes only"
        ),
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
            f"`python -m pnc.studies.mujoco.data ENV --source minari|offline --seed S --out {directory}`"
        )
    manifest = json.loads(manifest_path.read_text())
    if minari_io.file_sha256(npz_path) != manifest.get("splits_file_sha256"):
        raise ValueError(
            f"{npz_path} does not match the hash in {manifest_path}; rebuild the splits: in the "
            f"workflow `snakemake --forcerun {directory.as_posix()}/manifest.json`, by hand "
            "`python -m pnc.studies.mujoco.data ... --force`"
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
