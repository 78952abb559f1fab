"""The long-run scripts find or set up the Python they need before doing anything else: from a
fresh clone (no ``.venv``), ``scripts/reference_runs.sh``, ``scripts/reference_tables.sh`` and
``scripts/mechanism_seeds.sh`` set up the project's ``.venv`` as ``scripts/quick.sh`` does
(``scripts/venv.sh``'s ``ready_python``), or, with ``PNC_NO_SETUP=1``, stop at once naming the
command to run; ``scripts/slurm_check.sh`` (run as root) never sets one up and stops at once
naming it. Each case runs a copy of ``scripts/`` in a temporary directory, with a stub
``setup_venv`` where setting up is the behaviour under test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test starts bash in a subprocess

ROOT = Path(__file__).resolve().parents[1]
SETUP = 'source scripts/venv.sh && setup_venv "."'
#: What the long-run scripts set up: the workflows' extra, from the lock file.
SETUP_WORKFLOW = 'source scripts/venv.sh && setup_venv ".[workflow]"'


def _clone(tmp_path: Path) -> Path:
    """A checkout without a ``.venv``: the scripts and the reference config."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    (repo / "config").mkdir()
    shutil.copyfile(ROOT / "config" / "offline.yaml", repo / "config" / "offline.yaml")
    return repo


def _run(repo: Path, command: str, **extra: str) -> subprocess.CompletedProcess:
    """``command`` in ``repo``, without ``PYTHON`` and the project's venv: first on ``PATH`` is a
    ``python`` that imports nothing (whatever the machine has installed), then the system's
    tools."""
    stubs = repo.parent / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "python").write_text("#!/bin/sh\nexit 1\n")
    (stubs / "python").chmod(0o755)
    drop = ("PYTHON", "PNC_NO_SETUP", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{stubs}:/usr/bin:/bin"
    return subprocess.run(
        ["bash", "-c", command], cwd=repo, env={**env, **extra}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


@pytest.mark.parametrize(
    "script",
    [
        "scripts/reference_runs.sh --envs InvertedPendulum --seeds 0",
        "scripts/reference_tables.sh --mechanism --cores 2",
        "scripts/mechanism_seeds.sh --envs InvertedPendulum --seeds 1",
    ],
)
def test_a_fresh_clone_without_setting_up_stops_at_once_naming_the_command(tmp_path, script):
    repo = _clone(tmp_path)
    done = _run(repo, f"bash {script}", PNC_NO_SETUP="1")
    assert done.returncode == 2, done.stderr
    assert SETUP_WORKFLOW in done.stderr
    assert "snakemake" not in done.stdout  # nothing ran: no piece, no restore
    assert not (repo / "logs").exists() and not (repo / "reference_study").exists()
    assert not (repo / "mechanism_study").exists()


def test_a_python_named_in_PYTHON_that_lacks_the_project_stops_the_script(tmp_path):
    repo = _clone(tmp_path)
    done = _run(repo, "bash scripts/reference_runs.sh --seeds 0", PYTHON="/bin/false")
    assert done.returncode == 2
    assert "PYTHON=/bin/false cannot run" in done.stderr and "unset PYTHON" in done.stderr


def _stub_setup(works: bool) -> str:
    """Shell code that sources venv.sh and replaces ``setup_venv`` by a stub recording its
    argument and making a ``.venv/bin/python`` that imports everything (``works``) or nothing."""
    body = "exit 0" if works else "exit 1"
    return (
        "source scripts/venv.sh; "
        'setup_venv() { echo "$1" > setup_called; mkdir -p .venv/bin; '
        f"printf '#!/bin/sh\\n{body}\\n' > .venv/bin/python; chmod +x .venv/bin/python; }}; "
    )


def test_ready_python_sets_up_the_missing_venv_and_prints_its_python(tmp_path):
    repo = _clone(tmp_path)
    done = _run(repo, _stub_setup(works=True) + "ready_python . snakemake")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(repo / ".venv" / "bin" / "python")
    assert (repo / "setup_called").read_text().strip() == "."
    assert "setting it up" in done.stderr
    # a second call finds the venv and sets up nothing
    (repo / "setup_called").unlink()
    again = _run(repo, _stub_setup(works=True) + "ready_python . snakemake")
    assert again.returncode == 0 and not (repo / "setup_called").exists()


def test_ready_python_reports_a_set_up_that_leaves_the_venv_unusable(tmp_path):
    repo = _clone(tmp_path)
    done = _run(repo, _stub_setup(works=False) + "ready_python . snakemake")
    assert done.returncode == 2 and done.stdout == ""
    assert f"setting up .venv failed (see above); run: {SETUP}" in done.stderr


def test_slurm_check_without_a_python_stops_before_installing_or_starting_anything(tmp_path):
    repo = _clone(tmp_path)
    scratch = tmp_path / "scratch"
    done = _run(repo, "bash scripts/slurm_check.sh", SLURM_CHECK_DIR=str(scratch))
    assert done.returncode == 2, done.stderr
    assert f"cd {repo} && {SETUP_WORKFLOW}" in done.stderr
    assert not scratch.exists()  # no temporary directory, no packages, no daemons


def test_compile_project_byte_compiles_the_package_and_only_what_changed(tmp_path):
    """``compile_project`` (quick.sh, test.sh, setup_venv) writes the package's compiled modules,
    which Python reads on import even where ``PYTHONDONTWRITEBYTECODE`` stops it writing them,
    and compiles a module again only when its source changed."""
    repo = _clone(tmp_path)
    (repo / "pnc" / "sub").mkdir(parents=True)
    (repo / "pnc" / "__init__.py").write_text("X = 1\n")
    (repo / "pnc" / "sub" / "mod.py").write_text("Y = 2\n")
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / ".venv" / "bin" / "python").symlink_to(sys.executable)
    tag = sys.implementation.cache_tag
    top = repo / "pnc" / "__pycache__" / f"__init__.{tag}.pyc"
    sub = repo / "pnc" / "sub" / "__pycache__" / f"mod.{tag}.pyc"

    done = _run(repo, "source scripts/venv.sh && compile_project", PYTHONDONTWRITEBYTECODE="1")
    assert done.returncode == 0, done.stderr
    assert top.is_file() and sub.is_file()
    before = {p: p.read_bytes() for p in (top, sub)}
    os.utime(top, (1, 1))  # an unchanged source's compiled file is left alone
    (repo / "pnc" / "sub" / "mod.py").write_text("Y = 3\n")
    os.utime(repo / "pnc" / "sub" / "mod.py", (2e9, 2e9))  # a later edit of the same size
    done = _run(repo, "source scripts/venv.sh && compile_project", PYTHONDONTWRITEBYTECODE="1")
    assert done.returncode == 0, done.stderr
    assert top.read_bytes() == before[top] and top.stat().st_mtime == 1
    assert sub.read_bytes() != before[sub]
    imported = subprocess.run(
        [sys.executable, "-c", "import pnc.sub.mod as m; print(m.Y, m.__cached__)"],
        cwd=repo, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    assert imported.stdout.split() == ["3", str(sub)]
