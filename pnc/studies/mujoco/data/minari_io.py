"""Reading and writing Minari datasets under an explicit root, and turning episodes into transitions.

Minari locates datasets through ``$MINARI_DATASETS_PATH``; :func:`using_root` sets it for the
duration of one call so every function here takes the root as an argument. With
``download=False`` and the dataset present locally, no network is touched.

A transition is ``(s_t, a_t) -> s_{t+1} - s_t`` with input ``x = concat(s_t, a_t)``; transitions are
formed inside each episode only (Minari stores ``T + 1`` observations per episode of ``T`` steps,
the last being the observation after the final step), so none crosses an episode boundary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import shutil
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pnc.studies.mujoco.data.errors import (
    DatasetMissingError,
    DimensionMismatchError,
    NonFiniteDataError,
)

#: Key under which the data layer records how a dataset it wrote was made.
PROVENANCE_KEY = "pnc_provenance"


@dataclasses.dataclass(frozen=True)
class Episode:
    """One episode of a Box-observation, Box-action environment.

    Attributes:
        observations: ``[T + 1, obs]``, including the observation after the last step.
        actions: ``[T, act]``.
        rewards: ``[T]``.
        terminations: ``[T]`` bools.
        truncations: ``[T]`` bools.
        seed: the reset seed, if known.
    """

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    seed: int | None = None

    def __post_init__(self) -> None:
        t = len(self.actions)
        if self.observations.ndim != 2 or self.actions.ndim != 2:
            raise ValueError(
                f"observations and actions must be 2-D, got {self.observations.shape}, "
                f"{self.actions.shape}"
            )
        if len(self.observations) != t + 1:
            raise ValueError(
                f"an episode of {t} steps needs {t + 1} observations, got {len(self.observations)}"
            )
        if not (len(self.rewards) == len(self.terminations) == len(self.truncations) == t):
            raise ValueError("rewards, terminations and truncations need one entry per step")

    def __len__(self) -> int:
        return len(self.actions)

    @property
    def episode_return(self) -> float:
        return float(np.sum(self.rewards))


def resolve_root(root: str | Path | None) -> Path:
    """The Minari root: ``root`` if given, else ``$MINARI_DATASETS_PATH``, else Minari's default."""
    if root is not None:
        return Path(root).expanduser().resolve()
    env = os.environ.get("MINARI_DATASETS_PATH")
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".minari" / "datasets"


@contextlib.contextmanager
def using_root(root: str | Path | None) -> Iterator[Path]:
    """Point Minari at ``root`` (see :func:`resolve_root`) inside the ``with`` block."""
    path = resolve_root(root)
    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(path)
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous


def dataset_exists(dataset_id: str, root: str | Path | None) -> bool:
    """Whether ``dataset_id`` is stored under ``root``."""
    return (resolve_root(root) / dataset_id / "data").is_dir()


#: Prefix of the folder under the Minari root where a download is assembled (``.downloading-`` and
#: the dataset id with ``--`` for ``/``), before its files are checked against the remote's listing
#: and moved into place. One folder per dataset, directly under the root: concurrent downloads of
#: different datasets share no staging folder that one of them could delete under the other.
STAGING_PREFIX = ".downloading-"


def staging_folder(root: Path, dataset_id: str) -> Path:
    """The folder a download of ``dataset_id`` is assembled in (:data:`STAGING_PREFIX`)."""
    return root / (STAGING_PREFIX + dataset_id.replace("/", "--"))


#: Minari's default remote (``minari.storage.remotes.DEFAULT_REMOTE``), read like Minari does.
DEFAULT_REMOTE = "hf://farama-minari"


def minari_remote() -> str:
    """The remote Minari downloads from: ``$MINARI_REMOTE``, else Minari's default."""
    return os.environ.get("MINARI_REMOTE", DEFAULT_REMOTE)


def describe_remote() -> str:
    """The remote and, for a Hugging Face remote, the endpoint it is reached at
    (``$HF_ENDPOINT``, else ``https://huggingface.co``)."""
    remote = minari_remote()
    if remote.startswith("hf://"):
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
        return f"{remote} at {endpoint}"
    return remote


def _sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (datasets run to gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _git_blob_id(path: Path) -> str:
    """Git's object id of a file's content (what the Hub lists for a file not stored in LFS)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def remote_listing(dataset_id: str) -> dict[str, dict[str, Any]]:
    """The files of ``dataset_id`` on a Hugging Face remote, from the repository's tree listing.

    Returns:
        ``{path relative to the dataset folder: {"size", "sha256" or "git_oid"}}``: the SHA-256 of
        a file stored in LFS, else its git blob id.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    remote = minari_remote()
    if not remote.startswith("hf://"):
        raise ValueError(f"only Hugging Face remotes (hf://) can be verified, got {remote!r}")
    group, _, rest = dataset_id.partition("/")
    listing = {}
    for entry in HfApi().list_repo_tree(
        f"{remote[len('hf://') :]}/{group}", path_in_repo=rest, recursive=True, repo_type="dataset"
    ):
        if isinstance(entry, RepoFile):
            rel = entry.path[len(rest) + 1 :] if rest else entry.path
            record = {"size": int(entry.size)}
            if entry.lfs is not None:
                record["sha256"] = entry.lfs.sha256
            else:
                record["git_oid"] = entry.blob_id
            listing[rel] = record
    return listing


def check_files(directory: str | Path, listing: dict[str, dict[str, Any]]) -> list[str]:
    """What differs between the files under ``directory`` and ``listing`` (see
    :func:`remote_listing`): missing files, sizes, checksums; ``[]`` when they agree."""
    directory = Path(directory)
    problems = []
    for rel, want in sorted(listing.items()):
        path = directory / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
            continue
        size = path.stat().st_size
        if size != want["size"]:
            problems.append(f"{rel}: {size} bytes, the remote lists {want['size']}")
        elif "sha256" in want and (got := _sha256(path)) != want["sha256"]:
            problems.append(f"{rel}: SHA-256 {got}, the remote lists {want['sha256']}")
        elif "git_oid" in want and (got := _git_blob_id(path)) != want["git_oid"]:
            problems.append(f"{rel}: git blob id {got}, the remote lists {want['git_oid']}")
    return problems


def download_dataset(dataset_id: str, root: str | Path | None) -> Path:
    """Download ``dataset_id`` with Minari into ``root``; only a dataset whose every file matches the
    remote's listing is kept.

    Minari downloads into ``root/.downloading-<dataset id>`` (:func:`staging_folder`). Every file is
    then checked against the remote's tree listing (size, and the SHA-256 of an LFS file or the git
    blob id of another): a dataset that matches is moved to ``root/<dataset_id>`` in one rename,
    one that does not is deleted with its staging folder. The staging folder is deleted whatever
    happens (a failure, a refusal, Ctrl-C), and again before a download starts (what a killed
    process left). ``huggingface_hub`` (2.x) keeps no partial file between processes, so a
    download that was cut off starts again from the beginning.

    Returns:
        The dataset's folder under ``root``.

    Raises:
        DatasetMissingError: the download failed or a file did not match (nothing is left under
            ``root`` for this dataset).
    """
    import minari

    path = resolve_root(root)
    stage = staging_folder(path, dataset_id)
    staged = stage / dataset_id
    final = path / dataset_id
    shutil.rmtree(stage, ignore_errors=True)  # what a process killed during a download left
    try:
        with using_root(stage):
            minari.download_dataset(dataset_id)
        problems = check_files(staged, remote_listing(dataset_id))
        if problems:
            raise DatasetMissingError(
                f"Minari dataset {dataset_id!r} downloaded from {describe_remote()} does not match "
                f"the remote's listing ({'; '.join(problems)}); it was deleted. Run again to "
                "download it again."
            )
        final.parent.mkdir(parents=True, exist_ok=True)
        if not final.exists():  # else placed meanwhile by another process: keep that copy
            os.replace(staged, final)
        # Minari's namespace records (namespace_metadata.json of each level of the id)
        for meta in stage.rglob("namespace_metadata.json"):
            rel = meta.relative_to(stage)
            if ".cache" not in rel.parts and not (path / rel).exists():
                (path / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(meta, path / rel)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return final


def load_dataset(dataset_id: str, *, root: str | Path | None = None, download: bool = False):
    """Open a Minari dataset stored under ``root`` (downloading it only if ``download``, with
    :func:`download_dataset`).

    Raises:
        DatasetMissingError: the dataset is absent and ``download`` is false, or its download
            failed or was refused; the message lists the ways to provide it.
    """
    import minari

    with using_root(root) as path:
        present = dataset_exists(dataset_id, path)
        if not download and not present:
            raise DatasetMissingError(
                f"Minari dataset {dataset_id!r} not found under {path} and downloading is disabled. "
                "Fix: pass --download (needs access to Minari's remote storage), point "
                "--minari-root / $MINARI_DATASETS_PATH at a directory holding a copy, or use "
                "--source offline to train on behaviour datasets generated locally."
            )
        if present:
            return minari.load_dataset(dataset_id)
        try:
            download_dataset(dataset_id, path)
        except DatasetMissingError:
            raise
        except Exception as err:  # network, hub and storage errors come in many types
            raise DatasetMissingError(
                f"Minari dataset {dataset_id!r} is not under {path} and downloading it from "
                f"{describe_remote()} failed ({type(err).__name__}: {err}). Fix: run where the "
                "remote is reachable (MINARI_REMOTE, HF_ENDPOINT name a mirror), place the "
                f"dataset by hand as {path / dataset_id} (a copy of the folder `minari download "
                f"{dataset_id}` writes under $MINARI_DATASETS_PATH elsewhere), or use --source "
                "offline (workflow: data.source: offline) to train on behaviour datasets "
                "generated locally."
            ) from err
        return minari.load_dataset(dataset_id)


def read_provenance(dataset_id: str, root: str | Path | None) -> dict[str, Any] | None:
    """The provenance record this package wrote into a dataset's metadata (``None`` if absent)."""
    if not dataset_exists(dataset_id, root):
        return None
    from minari.dataset.minari_storage import MinariStorage

    meta = MinariStorage.read_raw_metadata(resolve_root(root) / dataset_id / "data")
    return meta.get(PROVENANCE_KEY)


def read_episodes(dataset) -> list[Episode]:
    """All episodes of an opened Minari dataset (Box spaces only), in storage order."""
    episodes = []
    for ep in dataset.iterate_episodes():
        obs, act = ep.observations, ep.actions
        if not isinstance(obs, np.ndarray) or not isinstance(act, np.ndarray):
            raise TypeError(
                f"dataset {dataset.id}: only Box observation/action spaces are supported"
            )
        episodes.append(
            Episode(
                observations=obs.reshape(len(obs), -1),
                actions=act.reshape(len(act), -1),
                rewards=np.asarray(ep.rewards).reshape(-1),
                terminations=np.asarray(ep.terminations).reshape(-1),
                truncations=np.asarray(ep.truncations).reshape(-1),
            )
        )
    return episodes


def load_episodes(
    dataset_id: str, *, root: str | Path | None = None, download: bool = False
) -> list[Episode]:
    """:func:`load_dataset` followed by :func:`read_episodes`."""
    return read_episodes(load_dataset(dataset_id, root=root, download=download))


#: What a transition's target is: the next state ``s_{t+1}`` or the change ``s_{t+1} - s_t``.
TARGETS: tuple[str, ...] = ("next_state", "delta")


def episode_transitions(episode: Episode, target: str = "delta") -> tuple[np.ndarray, np.ndarray]:
    """The ``T`` transitions of one episode: ``x = (s_t, a_t) [T, obs + act]`` and ``y [T, obs]``,
    ``y = s_{t+1}`` (``target="next_state"``) or ``s_{t+1} - s_t`` (``"delta"``); float64."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    obs = np.asarray(episode.observations, np.float64)
    act = np.asarray(episode.actions, np.float64)
    y = obs[1:] if target == "next_state" else obs[1:] - obs[:-1]
    return np.concatenate([obs[:-1], act], axis=1), y


def transitions(
    episodes: Sequence[Episode], target: str = "delta"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack the transitions of ``episodes`` (``target`` as in :func:`episode_transitions`).

    Returns:
        ``x [N, obs + act]``, ``y [N, obs]`` (float64) and ``episode [N]``, the position in
        ``episodes`` each row came from.
    """
    if not episodes:
        raise ValueError("no episodes given")
    pairs = [episode_transitions(ep, target) for ep in episodes]
    x = np.concatenate([p[0] for p in pairs])
    y = np.concatenate([p[1] for p in pairs])
    index = np.repeat(np.arange(len(episodes)), [len(ep) for ep in episodes])
    return x, y, index


def episode_dims(dataset_id: str, episodes: Sequence[Episode]) -> tuple[int, int]:
    """``(obs_dim, act_dim)`` shared by all ``episodes`` (raises if they disagree)."""
    dims = {(ep.observations.shape[1], ep.actions.shape[1]) for ep in episodes}
    if len(dims) != 1:
        raise DimensionMismatchError(f"{dataset_id}: episodes disagree on (obs, act) sizes {dims}")
    return dims.pop()


def check_dims(named_dims: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Require every dataset in ``named_dims`` (id -> ``(obs, act)``) to have the same sizes."""
    distinct = set(named_dims.values())
    if len(distinct) != 1:
        listing = ", ".join(f"{k}: obs={o}, act={a}" for k, (o, a) in named_dims.items())
        raise DimensionMismatchError(
            "datasets of one environment disagree on observation/action sizes "
            f"({listing}); they must come from the same environment configuration"
        )
    return distinct.pop()


def check_finite(dataset_id: str, episodes: Sequence[Episode]) -> None:
    """Raise :class:`NonFiniteDataError` naming the dataset, the first offending episodes and the
    counts if any observation or action is NaN/inf."""
    bad = [
        i
        for i, ep in enumerate(episodes)
        if not (np.all(np.isfinite(ep.observations)) and np.all(np.isfinite(ep.actions)))
    ]
    if bad:
        bad_obs = sum(int(np.sum(~np.isfinite(episodes[i].observations))) for i in bad)
        bad_act = sum(int(np.sum(~np.isfinite(episodes[i].actions))) for i in bad)
        shown = ", ".join(str(i) for i in bad[:10]) + (" ..." if len(bad) > 10 else "")
        raise NonFiniteDataError(
            f"{dataset_id}: {bad_obs} non-finite observation values and {bad_act} non-finite "
            f"action values in {len(bad)} of {len(episodes)} episodes (episode index {shown}); "
            "refusing to use the data"
        )


def content_hash(*arrays: np.ndarray) -> str:
    """SHA-256 over dtype, shape and bytes of each array (order matters)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def episodes_hash(episodes: Sequence[Episode]) -> str:
    """Content hash of a list of episodes (observations, actions, rewards, flags)."""
    h = hashlib.sha256()
    for ep in episodes:
        h.update(
            content_hash(
                ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations
            ).encode()
        )
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def ensure_namespace(dataset_id: str) -> None:
    """Create the Minari namespace of ``dataset_id`` under the current root unless it exists.

    Jobs that write datasets of one namespace at the same time (the Far data of two seeds of an
    environment) race in :func:`minari.create_dataset_from_buffers`: each checks that the namespace
    is missing, then :func:`minari.create_namespace` raises ``ValueError`` in the one that comes
    second. Here that error counts as success when the namespace exists afterwards (the other job
    made it); any other failure is raised. The dataset call then finds the namespace and leaves it.
    """
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import create_namespace, list_local_namespaces

    namespace = parse_dataset_id(dataset_id)[0]
    if namespace is None or namespace in list_local_namespaces():
        return
    try:
        create_namespace(namespace)
    except ValueError:
        if namespace not in list_local_namespaces():
            raise


def write_dataset(
    dataset_id: str,
    episodes: Sequence[Episode],
    *,
    gym_id: str,
    root: str | Path | None,
    provenance: dict[str, Any],
    algorithm_name: str,
    description: str,
    force: bool = False,
):
    """Write ``episodes`` as a Minari dataset with :func:`minari.create_dataset_from_buffers`.

    The provenance record (with the episodes' content hash added as ``content_sha256``) is stored in
    the dataset metadata under :data:`PROVENANCE_KEY`. An existing dataset with the same content is
    kept as it is; one with different content is replaced only when ``force``.

    Returns:
        ``(dataset, status)`` with ``status`` in ``{"created", "reused", "replaced"}``.

    Raises:
        CacheConflictError: the dataset exists with different content and ``force`` is false.
    """
    import gymnasium as gym
    import minari
    import mujoco
    from minari.data_collector.episode_buffer import EpisodeBuffer

    from pnc.studies.mujoco.data.errors import CacheConflictError

    check_finite(dataset_id, episodes)
    provenance = dict(provenance, content_sha256=episodes_hash(episodes))
    status = "created"
    with using_root(root) as path:
        if dataset_exists(dataset_id, path):
            old = read_provenance(dataset_id, path) or {}
            if old.get("content_sha256") == provenance["content_sha256"]:
                return minari.load_dataset(dataset_id), "reused"
            if not force:
                raise CacheConflictError(
                    f"dataset {dataset_id!r} under {path} exists with different content "
                    f"(stored content hash {old.get('content_sha256')}, new "
                    f"{provenance['content_sha256']}); pass --force to replace it"
                )
            minari.delete_dataset(dataset_id)
            status = "replaced"
        buffers = [
            EpisodeBuffer(
                id=i,
                seed=ep.seed,
                observations=np.asarray(ep.observations),
                actions=np.asarray(ep.actions),
                rewards=list(np.asarray(ep.rewards, np.float64)),
                terminations=list(np.asarray(ep.terminations, bool)),
                truncations=list(np.asarray(ep.truncations, bool)),
            )
            for i, ep in enumerate(episodes)
        ]
        ensure_namespace(dataset_id)
        env = gym.make(gym_id)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*author_email.*")
                dataset = minari.create_dataset_from_buffers(
                    dataset_id=dataset_id,
                    buffer=buffers,
                    env=env,
                    eval_env=env,
                    algorithm_name=algorithm_name,
                    author="pnc",
                    code_permalink="pnc.studies.mujoco.data",
                    description=description,
                    ref_min_score=None,
                    requirements=[f"gymnasium=={gym.__version__}", f"mujoco=={mujoco.__version__}"],
                )
        finally:
            env.close()
        dataset.storage.update_metadata({PROVENANCE_KEY: provenance})
    return dataset, status
