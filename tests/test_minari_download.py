"""The workflow's first rule exercised for real: Minari downloads its datasets through
``huggingface_hub`` from a Hub-like server on 127.0.0.1 (``tests/loopback_hub.py``), with the
clients unchanged, pointed at it by ``MINARI_REMOTE`` and ``HF_ENDPOINT``; then the rest of a tiny
study runs on what was downloaded. The faults: a dataset the server lacks, a file cut short or
altered in transit, the server gone mid-run, a download interrupted (Ctrl-C) and run again.

The datasets are written by ``minari`` itself for two environments and their levels
(InvertedPendulum: expert, medium; Hopper: expert, medium, simple). Every test starts Snakemake in
a subprocess (the ``slow`` tier); every server stops in the fixture's teardown, or by itself after
its lifetime.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from loopback_hub import LoopbackHub, minari_namespace_files
from workflow_copy import copy_workflow, start_in_own_group

pytestmark = pytest.mark.slow

ENVS = ("InvertedPendulum", "Hopper")
#: behaviour level -> (transitions, action scale of the random policy that rolls it out)
LEVELS = {"expert": (600, 0.1), "medium": (400, 0.4), "simple": (400, 1.0)}
REMOTE = "hf://farama-minari"
REPO = "farama-minari/mujoco"
TARGET = "results/results.csv"
LIFETIME = 240.0  # s: a server stops itself after this, whatever the test does

#: The tiny study: both environments, one seed, P&C alone, a few dozen training steps.
CONFIG = {
    "envs": list(ENVS),
    "seeds": [0],
    "data": {
        "source": "minari",
        "minari_root": "resources/minari",
        "download": True,
        "transitions_per_regime": 300,
        "id_transitions": 150,
        "far_transitions": 300,
    },
    "model": {"hidden": [16, 16]},
    "train": {"steps": 60, "batch_size": 64, "patience": 3, "eval_every": 20},
    "methods": {
        "pnc": {
            "fixed": {
                "n_members": 4,
                "rank": 2,
                "layers": [0],
                "calibration_size": 128,
                "perturbation_norm": "radius",
                "ridge_center": "zero",
            },
            "grid": {"sigma": [4.0], "bootstrap_frac": [0.3], "ridge": [0.0001]},
        }
    },
    "run_methods": ["pnc"],  # an overlay of config.yaml: the methods that run
    "variance_calibration": ["raw"],
    "threads": {"train": 1, "evaluate": 1, "data": 1},
}


def _rollouts(gym_id: str, n_transitions: int, scale: float, seed: int):
    """Episodes of a random policy (uniform actions times ``scale``) as Minari episode buffers,
    ``n_transitions`` steps in all, and the environment they came from."""
    import gymnasium as gym
    from minari.data_collector.episode_buffer import EpisodeBuffer

    env = gym.make(gym_id, max_episode_steps=100)
    rng = np.random.default_rng(seed)
    low, high = env.action_space.low, env.action_space.high
    buffers, total = [], 0
    while total < n_transitions:
        obs, _ = env.reset(seed=seed + len(buffers))
        observations, actions, rewards, terms, truncs = [obs], [], [], [], []
        while True:
            action = (rng.uniform(low, high) * scale).astype(env.action_space.dtype)
            obs, reward, term, trunc, _ = env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(float(reward))
            terms.append(bool(term))
            truncs.append(bool(trunc))
            if term or trunc:
                break
        buffers.append(
            EpisodeBuffer(
                id=len(buffers),
                observations=np.asarray(observations),
                actions=np.asarray(actions),
                rewards=rewards,
                terminations=terms,
                truncations=truncs,
            )
        )
        total += len(actions)
    return env, buffers


@pytest.fixture(scope="module")
def source_root(tmp_path_factory) -> Path:
    """A Minari root written by ``minari``: ``mujoco/{env}/{level}-v0`` for both environments."""
    import minari

    from pnc.studies.mujoco.data import env_spec
    from pnc.studies.mujoco.data.minari_io import using_root

    root = tmp_path_factory.mktemp("minari-source")
    with using_root(root):
        for e, name in enumerate(ENVS):
            spec = env_spec(name)
            for i, (level, dataset_id) in enumerate(spec.minari_ids.items()):
                n, scale = LEVELS[level]
                env, buffers = _rollouts(spec.gym_id, n, scale, seed=100 * e + 10 * i)
                minari.create_dataset_from_buffers(
                    dataset_id,
                    buffers,
                    env=env,
                    eval_env=env,
                    algorithm_name=f"random-{scale}",
                    author="pnc tests",
                    author_email="tests@pnc.invalid",
                    code_permalink="tests/test_minari_download.py",
                    description=f"{level} level of {name}: random actions times {scale}",
                )
                env.close()
    return root


def _dataset_ids() -> list[str]:
    from pnc.studies.mujoco.data import env_spec

    return [i for name in ENVS for i in env_spec(name).minari_ids.values()]


def _repo(root: Path, drop: tuple[str, ...] = ()) -> dict[str, bytes]:
    """The server's ``farama-minari/mujoco`` repository from ``root``, without the datasets
    ``drop`` (ids)."""
    if drop:
        copy = root.parent / f"{root.name}-without"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy)
        for dataset_id in drop:
            shutil.rmtree(copy / dataset_id)
        root = copy
    return minari_namespace_files(root, "mujoco")


@pytest.fixture
def hub(source_root):
    """A server holding every dataset; stopped at teardown (or by itself after LIFETIME)."""
    server = LoopbackHub({REPO: _repo(source_root)}, lifetime=LIFETIME).start()
    yield server
    server.stop()


def _client_env(hub_url: str, home: Path) -> dict[str, str]:
    """The environment of Snakemake and its jobs: Minari's remote and the Hub endpoint on the
    server, a Hugging Face home of the test's own, no telemetry, no Xet, no token, no proxy."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k.upper() not in {"HF_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"}
    }
    env.update(
        PYTHONWARNINGS="ignore",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        MINARI_REMOTE=REMOTE,
        HF_ENDPOINT=hub_url,
        HF_HOME=str(home / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_XET="1",
        HF_HUB_DISABLE_IMPLICIT_TOKEN="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_HUB_OFFLINE="0",
        NO_PROXY="127.0.0.1,localhost",
    )
    return env


def _workdir(path: Path, **data) -> Path:
    """A copy of the workflow with the tiny study's config (``data`` keys replaced)."""
    copy_workflow(path, ("workflow", "config", "envs", "profiles"), ("Snakefile", "config.yaml"))
    config = json.loads(json.dumps(CONFIG))
    config["data"].update(data)
    (path / "mirror.yaml").write_text(yaml.safe_dump(config))
    return path


def _snakemake(workdir: Path, env: dict, *targets: str, cores: int = 2, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *targets, "--cores", str(cores)]
        + ["--configfile", "mirror.yaml"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _output(proc) -> str:
    return proc.stdout + proc.stderr


def _logs(workdir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((workdir / "logs").rglob("*.log")))


def _same_files(a: Path, b: Path) -> bool:
    """Whether the folders hold the same relative paths with the same bytes."""
    files = lambda d: {
        p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
    }
    return files(a) == files(b)


def _placed(root: Path) -> list[str]:
    """The ids of the datasets under ``root`` (a staging folder's included), but for the Far data
    the workflow makes (namespace ``pnc``)."""
    found = [str(p.parent.relative_to(root)) for p in sorted(root.rglob("data")) if p.is_dir()]
    return [i for i in found if not i.startswith("pnc/")]


# ----------------------------------------------------------------------------- the tiny study


@pytest.fixture(scope="module")
def downloaded_study(source_root, tmp_path_factory):
    """The tiny study from an empty Minari root, every dataset downloaded from the server."""
    workdir = _workdir(tmp_path_factory.mktemp("downloaded"))
    with LoopbackHub({REPO: _repo(source_root)}, lifetime=LIFETIME) as server:
        proc = _snakemake(workdir, _client_env(server.url, workdir), TARGET)
        requests = list(server.requests)
    assert proc.returncode == 0, _output(proc)[-4000:] + _logs(workdir)[-4000:]
    return workdir, requests


@pytest.fixture(scope="module")
def placed_study(source_root, tmp_path_factory):
    """The same study on the same datasets copied by hand into the Minari root, downloading off
    and the endpoint pointed at a closed port."""
    workdir = _workdir(tmp_path_factory.mktemp("placed"), download=False)
    shutil.copytree(source_root / "mujoco", workdir / "resources/minari/mujoco")
    proc = _snakemake(workdir, _client_env("http://127.0.0.1:9", workdir), TARGET)
    assert proc.returncode == 0, _output(proc)[-4000:] + _logs(workdir)[-4000:]
    return workdir


def test_downloaded_datasets_are_minaris_files_byte_for_byte(source_root, downloaded_study):
    """Every dataset of both environments came over HTTP from the server, through the clients'
    own requests (listing, revision, tree, HEAD and GET of each file), and is stored exactly as
    ``minari`` wrote it; no staging folder is left."""
    workdir, requests = downloaded_study
    root = workdir / "resources/minari"
    ids = _dataset_ids()
    assert len(ids) == 5
    for dataset_id in ids:
        assert _same_files(root / dataset_id, source_root / dataset_id), dataset_id
        rel = dataset_id.split("/", 1)[1]
        gets = [
            r for r in requests if r[0] == "GET" and r[1].endswith(f"{rel}/data/main_data.hdf5")
        ]
        heads = [
            r for r in requests if r[0] == "HEAD" and r[1].endswith(f"{rel}/data/main_data.hdf5")
        ]
        assert len(gets) == 1 and heads, (dataset_id, requests)
    paths = {r[1] for r in requests}
    assert "/api/datasets" in paths
    assert f"/api/datasets/{REPO}/revision/main" in paths
    assert any(p.startswith(f"/api/datasets/{REPO}/tree/") for p in paths)
    assert not list(root.glob(".downloading*"))
    for name in ENVS:
        record = json.loads((workdir / f"resources/data/{name}/minari.json").read_text())
        assert {v["id"] for v in record["datasets"].values()} == {
            i for i in ids if f"/{name.lower()}/" in i
        }


def test_study_from_downloaded_data_equals_study_from_placed_data(downloaded_study, placed_study):
    """results.csv of the tiny study is the same, byte for byte, whether its datasets were
    downloaded or placed by hand; it holds both environments and the Mid split of Hopper."""
    downloaded = (downloaded_study[0] / TARGET).read_bytes()
    assert downloaded == (placed_study / TARGET).read_bytes()
    text = downloaded.decode()
    assert "InvertedPendulum" in text and "Hopper" in text and ",mid," in text
    assert "minari" in text


# ----------------------------------------------------------------------------- faults


def test_dataset_the_server_lacks_stops_the_run_before_any_other_job(source_root, tmp_path):
    """The remote lacks Hopper's Mid dataset: the download job fails naming the id and the
    remote, and no job other than the downloads runs."""
    missing = "mujoco/hopper/simple-v0"
    workdir = _workdir(tmp_path / "w")
    with LoopbackHub({REPO: _repo(source_root, drop=(missing,))}, lifetime=LIFETIME) as server:
        proc = _snakemake(workdir, _client_env(server.url, tmp_path), TARGET, cores=1)
        url = server.url
    assert proc.returncode != 0
    log = (workdir / "logs/minari_data/Hopper.log").read_text()
    assert missing in log and REMOTE in log and url in log, log[-3000:]
    assert "Error in rule minari_data" in _output(proc)
    # every job writes its log: only download jobs started
    ran = {p.relative_to(workdir / "logs").parts[0] for p in (workdir / "logs").rglob("*.log")}
    assert ran == {"minari_data"}, ran
    assert not list(workdir.glob("resources/data/*/far-*.json"))
    assert not (workdir / "resources/splits").exists()
    # under results/ only the grid tables, which the DAG writes before any job runs
    made = {p.relative_to(workdir / "results").parts[0] for p in (workdir / "results").rglob("*")}
    assert made <= {"grid"}, made
    assert not list((workdir / "resources/minari").glob(".downloading*"))


def test_files_cut_short_or_altered_are_refused_and_downloaded_again(hub, source_root, tmp_path):
    """Hopper's expert data arrive cut to half their length (with a matching Content-Length) and
    its medium data with one byte changed: both datasets are refused, nothing of them is left in
    the Minari root (the Mid dataset, which matches the remote, is kept), and a rerun downloads
    them again, correct."""
    cut, changed = (f"hopper/{level}-v0/data/main_data.hdf5" for level in ("expert", "medium"))
    hub.altered.update({cut: "truncate", changed: "flip"})
    workdir = _workdir(tmp_path / "w")
    root = workdir / "resources/minari"
    env = _client_env(hub.url, tmp_path)
    record = "resources/data/Hopper/minari.json"
    proc = _snakemake(workdir, env, record, cores=1)
    assert proc.returncode != 0
    log = (workdir / "logs/minari_data/Hopper.log").read_text()
    assert "expert (mujoco/hopper/expert-v0), medium (mujoco/hopper/medium-v0)" in log, log[-3000:]
    # huggingface_hub refuses the short file; the check against the remote's listing the other
    assert "Consistency check failed" in log and "does not match the remote's listing" in log
    assert "data/main_data.hdf5: SHA-256" in log
    assert _placed(root) == ["mujoco/hopper/simple-v0"]
    assert not list(root.glob(".downloading*")) and not (workdir / record).exists()
    assert not [p for p in root.rglob("*") if p.name.endswith((".incomplete", ".lock"))]

    sent = {name: len(hub.served("GET", re.escape(name))) for name in (cut, changed)}
    hub.altered.clear()
    proc = _snakemake(workdir, env, record, cores=1)
    assert proc.returncode == 0, _output(proc)[-3000:]
    assert {name: len(hub.served("GET", re.escape(name))) for name in sent} == {
        name: n + 1 for name, n in sent.items()
    }
    assert _placed(root) == sorted(i for i in _dataset_ids() if "hopper" in i)
    for dataset_id in _placed(root):
        assert _same_files(root / dataset_id, source_root / dataset_id), dataset_id


def missing_level(env: str, dataset_id: str) -> str:
    from pnc.studies.mujoco.data import env_spec

    return next(level for level, i in env_spec(env).minari_ids.items() if i == dataset_id)


def test_server_gone_mid_run_names_what_is_missing_and_how_to_place_it(hub, tmp_path):
    """The server stops once it has sent the first dataset's data: the run fails with a message
    naming the environment's missing datasets, the remote and where to place each one by hand;
    the dataset that arrived is kept, complete, and nothing partial is left."""
    hub.stop_after = 1
    workdir = _workdir(tmp_path / "w")
    root = workdir / "resources/minari"
    proc = _snakemake(workdir, _client_env(hub.url, tmp_path), TARGET, cores=1)
    assert proc.returncode != 0 and not hub.running
    placed = _placed(root)
    assert len(placed) == 1, placed
    (failed,) = [
        p for p in (workdir / "logs/minari_data").glob("*.log") if "Error" in p.read_text()
    ]
    log = failed.read_text()
    env = failed.stem
    from pnc.studies.mujoco.data import env_spec

    missing = [i for i in env_spec(env).minari_ids.values() if i not in placed]
    assert missing and f"{env}: Minari datasets missing under {root}" in log, log[-3000:]
    for dataset_id in missing:
        assert f"({dataset_id})" in log
    assert f"Downloading them from {REMOTE} at {hub.url} failed" in log
    assert "To place them by hand, copy each dataset's folder" in log
    assert f"{root}/ID, e.g. {root / missing[0]}" in log
    # the request the server left unanswered is reset, the retries after it are refused: the
    # error named is the one of the client's last attempt, either of the two
    reason = re.search(rf"Errors: {missing_level(env, missing[0])}: (\w+): ([^|\n]*)", log)
    assert reason is not None, log[-3000:]
    assert reason[1] == "ConnectError" or (
        reason[1] == "ReadError" and "Connection reset by peer" in reason[2]
    ), reason.group(0)
    # the levels after the first that failed are not tried: the remote no longer answers
    assert log.count(f"not tried: the remote did not answer for {missing[0]}") == len(missing) - 1
    assert not list(root.glob(".downloading*"))
    assert not list(workdir.glob("resources/data/*/far-*.json"))


def test_interrupted_download_is_redone_by_a_rerun_without_recomputing_finished_jobs(hub, tmp_path):
    """Hopper's expert data stall halfway while InvertedPendulum's datasets, Far data and splits
    are made; the run is interrupted (Ctrl-C). Nothing of Hopper's download is left; the rerun
    downloads it again (huggingface_hub 2.x keeps no partial file between processes) and reruns
    none of the finished jobs."""
    stalled = "hopper/expert-v0/data/main_data.hdf5"
    hub.stall = stalled
    workdir = _workdir(tmp_path / "w")
    root = workdir / "resources/minari"
    env = _client_env(hub.url, tmp_path)
    splits = "resources/splits/{}/seed0/manifest.json"
    targets = [splits.format(name) for name in ENVS]
    finished = [
        workdir / "resources/data/InvertedPendulum/minari.json",
        workdir / "resources/data/InvertedPendulum/far-seed0.json",
        workdir / splits.format("InvertedPendulum"),
    ]
    args = [sys.executable, "-m", "snakemake", *targets, "--cores", "2"]
    proc = start_in_own_group(
        [*args, "--configfile", "mirror.yaml"], workdir, env, tmp_path / "interrupted.log"
    )
    try:
        deadline = time.monotonic() + 120
        # Hopper's splits need its datasets: a finished splits job is InvertedPendulum's
        done = re.compile(r"Finished jobid: \d+ \(Rule: splits\)")
        while not (
            hub.stalled.is_set() and done.search((tmp_path / "interrupted.log").read_text())
        ):
            assert proc.poll() is None, (tmp_path / "interrupted.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "InvertedPendulum's jobs did not finish"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        # the connection then drops and the file is refused: the job cannot finish it
        hub.refuse.add(stalled)
        hub.stall = None
        assert proc.wait(timeout=60) != 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "KeyboardInterrupt" in (workdir / "logs/minari_data/Hopper.log").read_text()
    assert not (workdir / "resources/data/Hopper/minari.json").exists()
    assert not [i for i in _placed(root) if "hopper" in i]
    assert not list(root.glob(".downloading*"))
    mtimes = {p: p.stat().st_mtime_ns for p in finished}
    started = time.time_ns()

    hub.refuse.clear()
    proc = _snakemake(workdir, env, *targets)
    assert proc.returncode == 0, _output(proc)[-3000:] + _logs(workdir)[-3000:]
    gets = hub.served("GET", re.escape(stalled))
    assert len(gets) == 3 and gets[-1][2] is None, gets  # stalled, refused, then whole
    assert {p: p.stat().st_mtime_ns for p in finished} == mtimes
    rewritten = [p for p in (workdir / "logs").rglob("*.log") if p.stat().st_mtime_ns > started]
    assert sorted(str(p.relative_to(workdir / "logs")) for p in rewritten) == [
        "far_data/Hopper/seed0.log",
        "minari_data/Hopper.log",
        "splits/Hopper/seed0.log",
    ]
    assert _placed(root) == sorted(_dataset_ids())
    assert not list(root.glob(".downloading*"))


def test_each_download_stages_in_its_own_folder_under_the_root(tmp_path):
    # a shared staging parent (.downloading/mujoco/...) let one download's clean-up remove a
    # folder another download was creating: FileNotFoundError in the second
    from pnc.studies.mujoco.data.minari_io import staging_folder

    ids = ("mujoco/invertedpendulum/expert-v0", "mujoco/invertedpendulum/medium-v0", "a/b")
    folders = [staging_folder(tmp_path, i) for i in ids]
    assert all(f.parent == tmp_path for f in folders) and len(set(folders)) == len(ids)
    assert folders[0].name == ".downloading-mujoco--invertedpendulum--expert-v0"
