"""Benchmark: JAX's random bits on CPU with JAX's lowering of Threefry and with
:mod:`pnc.threefry`'s unrolled one, in separate processes, printing JSON.

    python -m pnc.bench.threefry [--rows 31000] [--width 200] [--repeats 10] [--out FILE]

Each process draws ``repeats`` dropout-sized masks (``jax.random.bernoulli`` of ``rows x width``,
one thread, compiled once first) and reports the CPU seconds and numbers per CPU second, and a
SHA-256 of every mask: the two lowerings must give the same digest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import hashlib, json, sys, time
import jax, numpy as np
mode, rows, width, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if mode == "unrolled":
    from pnc.threefry import use_unrolled_on_cpu
    assert use_unrolled_on_cpu()
draw = jax.jit(lambda k: jax.random.bernoulli(k, 0.9, (rows, width)))
key = jax.random.key(0)
draw(key).block_until_ready()
digest = hashlib.sha256()
cpu = 0.0
for i in range(repeats):
    k = jax.random.fold_in(key, i)
    t = time.process_time()
    mask = draw(k).block_until_ready()
    cpu += time.process_time() - t
    digest.update(np.asarray(mask).tobytes())
n = rows * width * repeats
print(json.dumps({"cpu_s": cpu, "numbers": n, "m_per_cpu_s": n / cpu / 1e6,
                  "sha256": digest.hexdigest()}))
"""


def measure(mode: str, rows: int, width: int, repeats: int) -> dict:
    """One child process's draws with ``mode`` ``jax`` or ``unrolled``."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    args = [sys.executable, "-c", _CHILD, mode, str(rows), str(width), str(repeats)]
    out = subprocess.run(args, capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=31000)
    parser.add_argument("--width", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    if min(args.rows, args.width, args.repeats) < 1:
        parser.error("--rows, --width and --repeats must be >= 1")
    result = {m: measure(m, args.rows, args.width, args.repeats) for m in ("jax", "unrolled")}
    result["speedup"] = result["jax"]["cpu_s"] / result["unrolled"]["cpu_s"]
    result["same_bits"] = result["jax"]["sha256"] == result["unrolled"]["sha256"]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if result["same_bits"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
