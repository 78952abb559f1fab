"""CPU pinning of the workflow's stages (pnc.runtime.stage.limit_threads, claim_cpus), executed for real
in fresh interpreters: the affinity of every thread, the XLA and BLAS variables, the lock files that
keep concurrent jobs on distinct CPUs (and still pin a job that finds none free), results that do
not depend on how busy the machine was, a second call with the same count (a batch's next stage)
that changes nothing, and the errors once the JAX backend has started or another count was set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PIN = """
import json, os, sys
import pnc.runtime.stage as W
cpus = W.limit_threads(1)
import jax.numpy as jnp
float(jnp.ones(3).sum())  # the backend starts under the pinning; its threads inherit it
threads = {t: sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task")}
same = W.limit_threads(1)  # a batch's next stage: the same count changes nothing
try:
    W.limit_threads(2)
    again = "no error"
except ValueError as e:
    again = str(e)
print(json.dumps({"cpus": cpus, "threads": threads, "again": again, "same": same,
                  "xla": os.environ["XLA_FLAGS"], "omp": os.environ["OMP_NUM_THREADS"]}))
"""

CLAIM = """
import json, subprocess, sys
import pnc.runtime.stage as W
mine = W.claim_cpus(1)
child = subprocess.run([sys.executable, "-c", "import pnc.runtime.stage as W; print(W.claim_cpus(1)[0])"],
                       capture_output=True, text=True, check=True)
print(json.dumps({"parent": mine, "child": [int(child.stdout)]}))
"""


def _run(code: str, tmp_path: Path, **env) -> dict:
    environ = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO), **env}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_limit_threads_pins_every_thread_and_sets_the_xla_flags(tmp_path):
    got = _run(PIN, tmp_path, XLA_FLAGS="--xla_dump_to=/nowhere --xla_cpu_multi_thread_eigen=true")
    allowed = sorted(os.sched_getaffinity(0))
    assert len(got["cpus"]) == 1 and got["cpus"][0] in allowed
    assert len(got["threads"]) > 1  # the interpreter's and XLA's threads
    assert all(c == got["cpus"] for c in got["threads"].values()), got["threads"]
    # unrelated flags are kept, the old thread flag is replaced (not duplicated)
    assert got["xla"].split() == [
        "--xla_dump_to=/nowhere",
        "--xla_cpu_multi_thread_eigen=false",
        "intra_op_parallelism_threads=1",
    ]
    assert got["omp"] == "1"
    assert got["same"] == got["cpus"]
    assert "limited to 1 threads already, not 2" in got["again"]


@pytest.mark.slow
def test_concurrent_jobs_claim_distinct_cpus(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU allowed: nothing to distribute")
    got = _run(CLAIM, tmp_path)
    assert got["parent"] != got["child"]
    assert list((tmp_path / f"pnc-cpus-{os.getuid()}").glob("cpu*.lock"))


FULL = """
import json, os, subprocess, sys
import pnc.runtime.stage as W
allowed = sorted(os.sched_getaffinity(0))
mine = W.claim_cpus(len(allowed) - 1)  # every CPU but the last is held by this job
code = "import json, pnc.runtime.stage as W; print(json.dumps([W.claim_cpus(1), W.claim_cpus(1)]))"
late = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout)
print(json.dumps({"allowed": allowed, "mine": mine, "late": late}))
"""


@pytest.mark.slow
def test_a_job_that_finds_too_few_free_cpus_still_runs_on_n_cpus(tmp_path):
    """With the other CPUs held by running (or paused) jobs, a job takes the free one; the next
    finds none free at the first rung and takes a CPU one rung up, neither unpinned nor on every
    CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU allowed: nothing to distribute")
    got = _run(FULL, tmp_path)
    allowed = got["allowed"]
    assert got["mine"] == allowed[:-1]
    assert got["late"][0] == [allowed[-1]]
    assert len(got["late"][1]) == 1 and got["late"][1][0] in allowed


EVERY_CPU_HELD = """
import json, os, subprocess, sys
import pnc.runtime.stage as W
allowed = sorted(os.sched_getaffinity(0))
mine = [W.claim_cpus(1) for _ in allowed]  # one job on every CPU (running, or paused)
code = "import json, pnc.runtime.stage as W; print(json.dumps([W.claim_cpus(1) for _ in range(N)]))"
late = json.loads(subprocess.run([sys.executable, "-c", code.replace("N", str(len(allowed)))],
                                 capture_output=True, text=True, check=True).stdout)
print(json.dumps({"allowed": allowed, "mine": mine, "late": late}))
"""


@pytest.mark.slow
def test_jobs_that_find_every_cpu_held_still_go_to_distinct_cpus(tmp_path):
    """With one job (perhaps paused) holding each CPU, as many new jobs as CPUs take one CPU each
    instead of piling onto one: the next rung of each CPU's lock ladder."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU allowed: nothing to distribute")
    got = _run(EVERY_CPU_HELD, tmp_path)
    allowed = got["allowed"]
    assert sorted(c for [c] in got["mine"]) == allowed
    assert sorted(c for [c] in got["late"]) == allowed
    locks = tmp_path / f"pnc-cpus-{os.getuid()}"
    assert {f"cpu{c}.1.lock" for c in allowed} <= {p.name for p in locks.iterdir()}


STOPPED_HOLDER = """
import json, os, signal, subprocess, sys, time
import pnc.runtime.stage as W
allowed = sorted(os.sched_getaffinity(0))
mine = W.claim_cpus(len(allowed) - 1)  # this running job holds every CPU but the last
stop = "import os, signal, pnc.runtime.stage as W; print(W.claim_cpus(1)[0], flush=True); "
stop += "os.kill(os.getpid(), signal.SIGSTOP)"
paused = subprocess.Popen([sys.executable, "-c", stop], stdout=subprocess.PIPE, text=True)
held = int(paused.stdout.readline())  # the last CPU, held by a job that then stops itself
for _ in range(500):
    if open(f"/proc/{paused.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T":
        break
    time.sleep(0.01)
code = "import json, pnc.runtime.stage as W; print(json.dumps([W.claim_cpus(1), W.claim_cpus(1)]))"
try:
    late = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                     text=True, check=True).stdout)
finally:
    paused.kill()
    paused.wait()
print(json.dumps({"allowed": allowed, "mine": mine, "held": held, "late": late}))
"""


@pytest.mark.slow
def test_a_cpu_whose_job_is_stopped_is_taken_before_one_whose_job_runs(tmp_path):
    """A paused job keeps its CPU's lock but not the CPU: with every other CPU held by a running
    job, the next job goes to the paused job's CPU (it went one rung up on the first CPU, beside a
    running job, leaving the paused one's CPU idle), and the job after it to a distinct CPU."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU allowed: nothing to distribute")
    got = _run(STOPPED_HOLDER, tmp_path)
    allowed = got["allowed"]
    assert got["mine"] == allowed[:-1] and got["held"] == allowed[-1]
    assert got["late"] == [[allowed[-1]], [allowed[0]]]
    locks = tmp_path / f"pnc-cpus-{os.getuid()}"
    assert (locks / f"cpu{allowed[-1]}.1.lock").is_file()


GRAM_JOB = """
import hashlib, json
import numpy as np
import pnc.runtime.stage as W
cpus = W.limit_threads(1)
import jax, jax.numpy as jnp
a = jnp.asarray(np.random.default_rng(0).normal(size=(2000, 201)).astype(np.float32))
gram = np.asarray(jax.jit(lambda a: a.T @ a / a.shape[0])(a))
print(json.dumps({"cpus": cpus, "sha": hashlib.sha256(gram.tobytes()).hexdigest()}))
"""

GRAM = """
import os, subprocess, sys
import pnc.runtime.stage as W
held = [W.claim_cpus(1) for _ in os.sched_getaffinity(0)] if BUSY else []  # every CPU held
out = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, check=True)
print(out.stdout.strip().splitlines()[-1])
"""


@pytest.mark.slow
def test_a_jobs_results_do_not_depend_on_how_busy_the_machine_is(tmp_path):
    """XLA orders a jitted Gram's sums by the number of CPUs the process may use: a job that finds
    every CPU held must compute the bits of a job that claimed one (it did not when such a job ran
    unpinned on every CPU)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU allowed: nothing to distribute")
    runs = {
        busy: _run(
            GRAM.replace("BUSY", str(busy)).replace("JOB", repr(GRAM_JOB)),
            tmp_path,
            PNC_COMPILE_CACHE="off",
        )
        for busy in (False, True)
    }
    assert all(len(r["cpus"]) == 1 for r in runs.values()), runs
    assert runs[True]["sha"] == runs[False]["sha"]


def test_limit_threads_rejects_zero_threads():
    from pnc.runtime.stage import limit_threads

    with pytest.raises(ValueError, match="threads must be >= 1"):
        limit_threads(0)
