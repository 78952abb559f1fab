"""python -m bench.breakdown: one job's CPU time split into start-up, compilation, I/O, compute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

STAGE = textwrap.dedent(
    """
    import sys

    import numpy as np


    def main(argv):
        import jax
        import jax.numpy as jnp

        @jax.jit
        def step(x):
            return jnp.tanh(x @ x.T).sum(axis=0)

        x = np.load(argv[0])
        for _ in range(3):  # compiled once
            y = step(x)
        np.save(argv[1], np.asarray(y))
        return 0
    """
)


def test_breakdown_of_a_job_adds_up_and_sees_compilation_and_io(tmp_path: Path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "__init__.py").write_text("")
    (tmp_path / "toy" / "stage.py").write_text(STAGE)
    np_in = tmp_path / "x.npy"
    import numpy as np

    np.save(np_in, np.arange(64 * 8, dtype=np.float32).reshape(64, 8) / 100)
    out = tmp_path / "breakdown.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]),
        "PNC_COMPILE_CACHE": "off",
    }
    cmd = [sys.executable, "-m", "bench.breakdown", "--out", str(out), "--"]
    cmd += ["toy.stage", str(np_in), str(tmp_path / "y.npy")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert result == json.loads(proc.stdout)
    assert (tmp_path / "y.npy").exists() and result["exit_status"] == 0
    parts = ("startup_imports_s", "compile_s", "io_s", "compute_s")
    assert sum(result[p] for p in parts) == pytest_approx(result["cpu_s"])
    assert result["startup_imports_s"] > 0.1  # JAX's import alone
    assert result["compile_s"] > 0
    backend = result["compile_events"]["/jax/core/compile/backend_compile_duration"]
    assert backend["count"] >= 1  # one jitted function, whatever eager ops add
    assert result["io_s"] >= 0 and result["compile_cache"] is None
    assert result["cache_hits"] == 0


def pytest_approx(value: float):
    import pytest

    return pytest.approx(value, abs=0.01)
