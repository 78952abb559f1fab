"""Helpers shared by the workflow tests: a copy of a workflow in a temporary directory, and
Snakemake run on it by the interpreter that runs the tests (whose environment has ``pnc``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_workflow(dest: Path, dirs: tuple[str, ...], files: tuple[str, ...]) -> Path:
    """Copy the directories ``dirs`` and files ``files`` (paths relative to the repository root)
    into ``dest``; the package itself is installed, so it is not copied. Returns ``dest``."""
    for name in dirs:
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in files:
        shutil.copy2(ROOT / name, dest / name)
    return dest


def run_snakemake(cwd: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m snakemake *args`` in ``cwd``; output captured as text. The jobs' ``python``
    is the interpreter running the tests (its directory first on ``PATH``)."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **os.environ,
            "PYTHONWARNINGS": "ignore",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        },
    )


def job_counts(output: str) -> dict[str, int]:
    """Parse the 'Job stats' table of a (dry) run."""
    match = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal\s+(\d+)", output, re.S)
    assert match, output[-3000:]
    counts = {}
    for line in match.group(1).splitlines():
        name, count = line.split()
        counts[name] = int(count)
    counts["total"] = int(match.group(2))
    return counts


def start_in_own_group(args: list[str], cwd: Path, env: dict, output: Path) -> subprocess.Popen:
    """Start ``args`` in ``cwd`` in a process group of its own (so that a test can signal the
    whole group: Snakemake and its jobs), stdout and stderr going to ``output``."""
    with output.open("w") as log:
        return subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            # a run started in the background of a non-interactive shell inherits SIGINT as
            # ignored, and Python then never raises KeyboardInterrupt: restore the default
            # handler, as a terminal's Ctrl-C finds it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def config_error(workdir: Path, snakefile: str, configfile: Path, replace: bool = False):
    """Build the DAG of ``workdir / snakefile`` on ``configfile`` in this process, as ``snakemake
    -n --configfile FILE`` does (``replace``: ``--replace-workflow-config``), and return the
    exception that stops it (``None`` when the DAG builds).

    The workflow's own files run unchanged (its config checks included); starting no interpreter,
    a check costs a fraction of a second instead of a Snakemake process's start-up. What the
    workflow sets in ``os.environ`` and ``sys.path``, and the working directory, are restored.
    """
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
    )

    environ, path, cwd = dict(os.environ), list(sys.path), os.getcwd()
    output = OutputSettings(dryrun=True, quiet={Quietness.ALL}, enable_file_logging=False)
    try:
        with SnakemakeApi(output) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                config_settings=ConfigSettings(
                    configfiles=[Path(configfile)], replace_workflow_config=replace
                ),
                snakefile=Path(workdir) / snakefile,
                workdir=Path(workdir),
            )
            workflow.dag(DAGSettings())
    except Exception as err:  # noqa: BLE001 - the error is what the caller checks
        return err
    finally:
        os.chdir(cwd)
        sys.path[:] = path
        os.environ.clear()
        os.environ.update(environ)
    return None
