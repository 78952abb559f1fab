"""Where one workflow job's time goes: ``python -m bench.breakdown [--out FILE] -- STAGE ARGS...``.

Runs the stage ``python -m pnc.workflow STAGE ARGS...`` in this process (``STAGE`` is a stage of
:mod:`pnc.workflow.commands`, e.g. ``train_run``; run it from the study's working directory with the job's shell
arguments, without the log redirection; a dotted name runs that module's ``main(argv)``) and prints one JSON object splitting the job's time into:

- ``startup_imports_s``: CPU seconds from the interpreter's start to the stage's ``main`` (Python
  start-up and the imports of JAX, NumPy and the project), plus the imports the stage makes lazily
  while it runs (each outermost ``import`` timed with :func:`time.process_time`, minus any JAX
  compilation inside it);
- ``compile_s``: CPU seconds spent turning functions into executables: between the start and the
  end JAX reports (``jax.monitoring``) of tracing to a jaxpr, lowering to MLIR and the backend
  compilation, which is a load when the persistent compilation cache has the function; by event
  in ``compile_events`` with their counts and wall and CPU seconds; ``cache_hits`` counts the
  functions loaded from the persistent cache;
- ``io_s``: CPU seconds inside file reads and writes (NumPy ``load``/``save*``, pandas CSV and
  Parquet, ``pathlib`` reads and writes, ``json.load``/``dump``, ``open``);
- ``compute_s``: the rest of the job's CPU time (training, building, prediction and the Python
  around them): ``cpu_s - startup_imports_s - compile_s - io_s``.

``cpu_s`` is the process's CPU time (all threads) at exit and ``wall_s`` its wall time since
start; every part is CPU time (:func:`time.process_time`), so a busy machine lengthens ``wall_s``
but not the parts. ``compile_cache`` names the cache directory the job used (None when off).
"""

from __future__ import annotations

import time

_CPU_AT_START = time.process_time()  # the interpreter's start-up is already in this

import argparse  # noqa: E402
import builtins  # noqa: E402
import functools  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from bench.command_line import emit  # noqa: E402

_COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)


class _Clock:
    """Accumulates the CPU time of outermost calls of one kind (imports, or file I/O)."""

    def __init__(self, outer: _Clock | None = None) -> None:
        self.seconds = 0.0
        self.depth = 0
        self.outer = outer  # calls inside the outer clock's are counted there only

    def wrap(self, fn: Any) -> Any:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth or (self.outer is not None and self.outer.depth):
                return fn(*args, **kwargs)
            self.depth += 1
            start = time.process_time()
            compile_before = _STATE["compile_s"]
            try:
                return fn(*args, **kwargs)
            finally:
                self.depth -= 1
                # JAX compilation inside (a module-level jitted constant) is counted as compile
                self.seconds += time.process_time() - start - (_STATE["compile_s"] - compile_before)

        return timed


_STATE: dict[str, float] = {"compile_s": 0.0}
# event -> [count, wall seconds, CPU seconds]
_EVENTS: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
_OPEN: list[tuple[str, float]] = []  # compile events under way: (event, CPU time at start)
_HITS = [0]


def _on_start(event: str, value: float, **kwargs: Any) -> None:
    # JAX records a scalar (the start time) as each compile event begins
    if event in _COMPILE_EVENTS:
        _OPEN.append((event, time.process_time()))


def _on_duration(event: str, duration: float, **kwargs: Any) -> None:
    if event not in _COMPILE_EVENTS:
        return
    now = time.process_time()
    for i in range(len(_OPEN) - 1, -1, -1):
        if _OPEN[i][0] == event:
            cpu = now - _OPEN.pop(i)[1]
            break
    else:  # no start seen: count the wall time
        cpu = duration
    record = _EVENTS[event]
    record[0] += 1
    record[1] += duration
    record[2] += cpu
    if not _OPEN:  # outermost: nested events are inside this one's time
        _STATE["compile_s"] += cpu


def _on_event(event: str, **kwargs: Any) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _HITS[0] += 1


def _patch_io(clock: _Clock) -> None:
    import numpy as np
    import pandas as pd

    for module, names in (
        (np, ("load", "save", "savez", "savez_compressed", "loadtxt", "savetxt")),
        (pd, ("read_csv", "read_parquet", "read_json")),
        (pd.DataFrame, ("to_csv", "to_parquet", "to_json")),
        (json, ("load", "dump")),
        (Path, ("read_bytes", "write_bytes", "read_text", "write_text")),
    ):
        for name in names:
            setattr(module, name, clock.wrap(getattr(module, name)))
    builtins.open = clock.wrap(builtins.open)


def run_stage(stage: str, argv: list[str]) -> dict[str, Any]:
    """Run the workflow stage ``stage`` (``python -m pnc.workflow STAGE ARGV``) in this process and
    return the breakdown.

    ``stage`` may also name any module with a ``main(argv)`` by its dotted name. Meant for a fresh
    process (the CLI): it counts the process's CPU time since start and patches the file functions
    and ``__import__`` for the rest of the process's life.
    """
    from pnc.runtime import compile_cache

    compile_cache.enable_from_env()  # as a job's start-up does, before JAX is imported
    wall_start = time.time() - _process_age()
    imports = _Clock()
    io = _Clock(outer=imports)
    real_import = builtins.__import__
    builtins.__import__ = imports.wrap(real_import)
    try:
        import jax.monitoring

        jax.monitoring.register_scalar_listener(_on_start)
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
        _patch_io(io)
        if "." in stage:  # any module's main(argv)
            main, args = importlib.import_module(stage).main, list(argv)
        else:  # a workflow stage
            main, args = importlib.import_module("pnc.workflow.commands").main, [stage, *argv]
        startup = time.process_time()
        imports_before_main = imports.seconds
        compile_before_main = _STATE["compile_s"]
        status = main(args)
    finally:
        builtins.__import__ = real_import

    cpu = time.process_time()
    # CPU up to main (interpreter, imports), plus the imports made while main ran
    startup_imports = startup - compile_before_main + imports.seconds - imports_before_main
    compile_s = _STATE["compile_s"]
    io_s = io.seconds
    cache = jax.config.jax_compilation_cache_dir or None
    return {
        "stage": stage,
        "argv": argv,
        "exit_status": status if isinstance(status, int) else 0,
        "wall_s": round(time.time() - wall_start, 3),
        "cpu_s": round(cpu, 3),
        "startup_imports_s": round(startup_imports, 3),
        "compile_s": round(compile_s, 3),
        "io_s": round(io_s, 3),
        "compute_s": round(cpu - startup_imports - compile_s - io_s, 3),
        "compile_events": {
            k: {"count": n, "wall_s": round(w, 3), "cpu_s": round(c, 3)}
            for k, (n, w, c) in _EVENTS.items()
        },
        "cache_hits": _HITS[0],
        "compile_cache": cache,
        "compile_cache_env": os.environ.get(compile_cache.ENV_VAR),
    }


def _process_age() -> float:
    """Wall seconds since this process started (``/proc/self/stat``; 0 where unavailable)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: python -m bench.breakdown [--out FILE] -- STAGE ARGS...", file=sys.stderr)
        return 2
    split = argv.index("--")
    p = argparse.ArgumentParser(description="Split one workflow job's time (see module docs).")
    p.add_argument("--out", help="also write the JSON object to this file")
    args = p.parse_args(argv[:split])
    stage_argv = argv[split + 1 :]
    if not stage_argv:
        p.error("give the stage after --, e.g. -- train_run --threads 1 ...")
    stage = stage_argv[0].removeprefix("pnc.workflow.")
    result = run_stage(stage, stage_argv[1:])
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
