"""Command-line stages of the Snakemake workflow: ``python -m pnc.workflow STAGE --threads N ...``.

Every rule's shell command runs one stage of :data:`pnc.workflow.commands.STAGES` through the one
entry point ``python -m pnc.workflow``, and every stage follows one convention: it parses its
arguments, calls :func:`limit_threads` with ``--threads`` (the rule's ``threads:``) before any JAX
computation, then calls one library function or command-line ``main``. Stages hold no logic of
their own. ``python -m pnc.workflow --help`` lists them.

The stages that run a library command line (:class:`pnc.workflow.commands.Forward`) take its
arguments after ``--threads N``, unchanged (:func:`forwarding_parser`); the library's exit status
is the stage's.

:func:`limit_threads` makes a job use the number of cores Snakemake gave it. XLA ignores
``OMP_NUM_THREADS`` and, on this JAX version, also runs a training scan on two busy threads whatever
``XLA_FLAGS`` say, so the process is pinned to ``n`` CPUs (``os.sched_setaffinity``); concurrent
jobs on one machine spread over the CPUs through lock files. The BLAS/OpenMP pools of NumPy are sized
by the ``OMP_NUM_THREADS``-style variables that Snakemake sets to the rule's ``threads`` for every
shell command, before the stage's interpreter starts.

:func:`limit_threads` also turns on the study's shared JAX compilation cache
(:func:`pnc.runtime.compile_cache.enable_from_env`: the directory in ``PNC_COMPILE_CACHE``, which the
workflow sets from the config key ``compile_cache``), so a job loads the functions an earlier job
compiled instead of compiling them again.
"""

from __future__ import annotations

import argparse
import fcntl
import importlib
import itertools
import json
import logging
import os
import sys
import tempfile
from pathlib import Path

from pnc.runtime import allocator, compile_cache
from pnc.runtime.io import PROCESS_RECORD

_XLA_THREAD_FLAGS = ("--xla_cpu_multi_thread_eigen", "intra_op_parallelism_threads")


def limit_threads(n: int) -> list[int]:
    """Restrict this process's JAX/XLA CPU work to ``n`` threads.

    Must run before the first JAX computation (importing JAX is fine; the backend starts lazily).
    Sets ``XLA_FLAGS`` (keeping any unrelated flags the user set) and the usual BLAS/OpenMP
    variables, pins every thread of the process to the CPUs :func:`claim_cpus` chooses (``n``
    free ones, else every allowed one) and turns on the compilation cache named by
    ``PNC_COMPILE_CACHE`` (:func:`pnc.runtime.compile_cache.enable_from_env`; none when it is unset).

    A second call with the same ``n`` changes nothing and returns the same CPUs (the stages that
    :func:`pnc.workflow.commands.batch` runs in one process each call it).

    Returns:
        The CPUs the process now runs on.

    Raises:
        ValueError: if ``n < 1``, if the JAX backend has already started, or if an earlier call
            limited the process to another number of threads.
    """
    if n < 1:
        raise ValueError(f"threads must be >= 1, got {n}")
    if _LIMITED:
        before, cpus = _LIMITED
        if before != n:
            raise ValueError(f"this process is limited to {before} threads already, not {n}")
        return list(cpus)
    if "jax" in sys.modules:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            raise ValueError("limit_threads must be called before the first JAX computation")
    kept = [
        f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(_XLA_THREAD_FLAGS)
    ]
    flags = [f"--xla_cpu_multi_thread_eigen={'true' if n > 1 else 'false'}"]
    flags.append(f"intra_op_parallelism_threads={n}")
    os.environ["XLA_FLAGS"] = " ".join(kept + flags)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)
    compile_cache.enable_from_env()
    cpus = claim_cpus(n)
    for task in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(task), cpus)
    _LIMITED[:] = [n, list(cpus)]
    return cpus


#: ``[threads, cpus]`` that :func:`limit_threads` applied to this process (empty before it ran).
_LIMITED: list = []


_HELD_LOCKS: list[int] = []

#: Jobs per CPU that :func:`claim_cpus` keeps apart by lock files; beyond that it spreads by pid.
LOCK_LEVELS = 64


def _lock_file(lock_dir: Path, cpu: int, level: int) -> Path:
    """The lock of the ``level``-th job on ``cpu`` (level 0 keeps the name ``cpu<k>.lock``)."""
    return lock_dir / (f"cpu{cpu}.lock" if level == 0 else f"cpu{cpu}.{level}.lock")


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding ``path``'s exclusive ``flock`` (created when missing), or
    ``None`` when another descriptor holds it."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _held_by_a_stopped_job(path: Path) -> bool:
    """Whether the held lock ``path`` belongs to a stopped process (``SIGSTOP``, ``Ctrl-Z``, a
    suspended cluster job): its holder wrote its pid there (:func:`claim_cpus`), and Linux gives the
    process's state in ``/proc/<pid>/stat``. False when either cannot be read."""
    try:
        pid = int(path.read_text().strip())
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] in (["T"], ["t"])


def _stopped_holders(lock_dir: Path, cpu: int) -> int:
    """How many rungs of ``cpu``'s lock ladder below its lowest free one are held by stopped jobs
    (:func:`_held_by_a_stopped_job`). The free rung is probed, not kept."""
    stopped = 0
    for level in range(LOCK_LEVELS):
        path = _lock_file(lock_dir, cpu, level)
        fd = _try_lock(path)
        if fd is not None:
            os.close(fd)  # the free rung: closing releases it
            return stopped
        stopped += _held_by_a_stopped_job(path)
    return stopped


def claim_cpus(n: int) -> list[int]:
    """Choose ``n`` of the CPUs this process may run on, those the fewest other running jobs hold.

    When more than ``n`` CPUs are allowed (a workstation; on a cluster the scheduler's cpuset usually
    allows exactly ``n``), CPUs are claimed with non-blocking ``flock`` on node-local lock files
    (``$TMPDIR/pnc-cpus-<uid>/cpu<k>.lock``), held until the process exits. Each CPU has a ladder of
    locks (``cpu<k>.lock``, ``cpu<k>.1.lock``, ...; :data:`LOCK_LEVELS` of them): a job takes the
    first free rung of the CPUs the fewest jobs hold. So when every CPU is held, by another study's
    jobs or by paused ones, the new jobs still go to distinct CPUs instead of onto the same one.
    A job writes its pid into the locks it holds, and a lock held by a stopped process (paused
    with ``SIGSTOP`` or ``Ctrl-Z``) does not count against its CPU: a paused job keeps its lock but
    leaves its CPU idle, and new jobs go there before doubling up on a CPU whose job runs (when the
    paused job resumes, its CPU has two). Only when every rung of every CPU is held are ``n``
    allowed CPUs returned unclaimed, starting at an offset given by the process id.

    A job always runs on exactly ``min(n, allowed)`` CPUs because XLA's CPU compiler partitions
    loops (and so orders floating-point sums) by the number of CPUs the process may use: the same
    jitted ``a.T @ a`` gives different bits on one allowed CPU than on two, whatever the thread
    flags say. Pinned to ``n`` CPUs, a job's results do not depend on how busy the machine was.
    """
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) <= n:
        return allowed
    lock_dir = Path(tempfile.gettempdir()) / f"pnc-cpus-{os.getuid()}"
    lock_dir.mkdir(parents=True, exist_ok=True)
    chosen: list[int] = []
    held: list[int] = []
    # rung by rung, a CPU's rungs shifted down by its stopped holders (ties: the lower rung, then
    # the lower CPU); concurrent jobs that order the rungs alike still meet at each lock's flock
    stopped = {cpu: _stopped_holders(lock_dir, cpu) for cpu in allowed}
    rungs = sorted(
        itertools.product(range(LOCK_LEVELS), allowed),
        key=lambda rung: (rung[0] - stopped[rung[1]], rung[0], rung[1]),
    )
    for level, cpu in rungs:
        if len(chosen) == n:
            break
        if cpu in chosen:
            continue
        fd = _try_lock(_lock_file(lock_dir, cpu, level))
        if fd is None:
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # read by _held_by_a_stopped_job
        held.append(fd)
        chosen.append(cpu)
    if len(chosen) < n:
        for fd in held:  # a partial claim would keep other jobs off CPUs this one does not own
            os.close(fd)
        start = os.getpid() % len(allowed)
        return sorted(allowed[(start + i) % len(allowed)] for i in range(n))
    _HELD_LOCKS.extend(held)
    return sorted(chosen)


#: The ``prog`` of the stage running now (set by :func:`pnc.workflow.commands.main`).
STAGE_PROGS: list[str] = []


def parser(description: str, *, allow_abbrev: bool = True) -> argparse.ArgumentParser:
    """Argument parser with the options every stage shares (``--threads``)."""
    p = argparse.ArgumentParser(
        prog=STAGE_PROGS[-1] if STAGE_PROGS else None,
        description=description,
        allow_abbrev=allow_abbrev,
    )
    p.add_argument("--threads", type=int, default=1, help="cores this job may use (default 1)")
    return p


def forwarding_parser(description: str) -> argparse.ArgumentParser:
    """:func:`parser` of a stage that runs a library command line with the arguments it leaves.

    Parse with ``parse_known_args``: the arguments other than the stage's own come back in their
    order, for the library's ``main(argv)``. Options are matched by their full names only, so no
    option of the library is taken for one of the stage's.
    """
    return parser(description, allow_abbrev=False)


def run_library_cli(
    module: str, description: str, argv: list[str] | None, *, command: tuple[str, ...] = ()
) -> int:
    """Run the command line ``python -m MODULE [COMMAND...] ARGS`` in-process on ``--threads`` CPUs.

    Parses ``--threads N`` (:func:`forwarding_parser`), calls :func:`limit_threads` before the
    library is imported, then returns ``MODULE.main([*command, *ARGS])`` with the remaining
    arguments in their order.
    """
    args, rest = forwarding_parser(description).parse_known_args(argv)
    limit_threads(args.threads)
    return importlib.import_module(module).main([*command, *rest])


def json_arg(text: str) -> object:
    """Parse a JSON command-line argument (``argparse`` ``type=``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not valid JSON: {err}") from None


def setup_logging() -> logging.Logger:
    """Log to stderr (Snakemake redirects it to the rule's ``log:`` file)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    return logging.getLogger("pnc.workflow")


def process_record(stage: str, status: int | None) -> dict:
    """This process's exact resource use so far: ``stage``, exit ``status``, ``cpu_s`` (user +
    system CPU of the process and its waited-for children), ``user_s``, ``system_s`` and
    ``max_rss_mb`` (peak resident set size of the process or its largest child), and the
    allocator's settings the process started with (:mod:`pnc.runtime.allocator`), which CPU times measured
    with different ones should name: ``glibc_tunables`` (``GLIBC_TUNABLES``, None if unset) and
    its ``glibc.malloc.hugetlb`` value (``malloc_hugetlb``, None if it sets none)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = own.ru_utime + kids.ru_utime, own.ru_stime + kids.ru_stime
    return {
        "stage": stage,
        "status": status,
        "cpu_s": round(user + system, 3),
        "user_s": round(user, 3),
        "system_s": round(system, 3),
        "max_rss_mb": round(max(own.ru_maxrss, kids.ru_maxrss) / 1024, 1),  # Linux: KiB
        "glibc_tunables": allocator.current(),
        "malloc_hugetlb": allocator.hugetlb(),
    }


def process_line(stage: str, status: int | None) -> str:
    """The line a stage writes to stderr as it ends: :data:`pnc.runtime.io.PROCESS_RECORD` and the JSON of
    :func:`process_record`. Snakemake's benchmark files sample a job's CPU time (every 30 s
    after its first 15 s, the last sample kept), so they undercount; this line is exact, and
    :func:`pnc.report.costs.read_benchmarks` prefers it when given the study's ``logs/``."""
    return PROCESS_RECORD + json.dumps(process_record(stage, status), sort_keys=True)
