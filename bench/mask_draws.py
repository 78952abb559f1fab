"""Benchmark: dropout masks with ``jax.random.bernoulli`` and with :func:`pnc.core.threefry.bernoulli`
(the unrolled hash), printing JSON.

    python -m bench.mask_draws [--rows 31000] [--width 200] [--repeats 10] [--out FILE]

Each draws ``repeats`` masks of ``rows x width`` (one thread, each compiled once first) and reports
the CPU seconds, numbers per CPU second and a SHA-256 of every mask: the two must agree.
"""

from __future__ import annotations

import hashlib
import time

from bench.command_line import bench_parser, emit


def measure(draw, rows: int, width: int, repeats: int) -> dict:
    """CPU time and digest of ``repeats`` masks ``draw(key, p, shape)`` (jitted here)."""
    import jax
    import numpy as np

    fn = jax.jit(lambda k: draw(k, 0.9, (rows, width)))
    key = jax.random.key(0)
    fn(key).block_until_ready()
    digest, cpu = hashlib.sha256(), 0.0
    for i in range(repeats):
        k = jax.random.fold_in(key, i)
        start = time.process_time()
        mask = fn(k).block_until_ready()
        cpu += time.process_time() - start
        digest.update(np.asarray(mask).tobytes())
    n = rows * width * repeats
    return {"cpu_s": cpu, "numbers": n, "m_per_cpu_s": n / max(cpu, 1e-9) / 1e6,
            "sha256": digest.hexdigest()}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__, out=True, rows=31000, width=200, repeats=10)
    args = parser.parse_args(argv)
    if min(args.rows, args.width, args.repeats) < 1:
        parser.error("--rows, --width and --repeats must be >= 1")
    import jax

    from pnc.core import threefry

    sizes = (args.rows, args.width, args.repeats)
    result = {
        "jax": measure(jax.random.bernoulli, *sizes),
        "unrolled": measure(threefry.bernoulli, *sizes),
    }
    result["speedup"] = result["jax"]["cpu_s"] / max(result["unrolled"]["cpu_s"], 1e-9)
    result["same_bits"] = result["jax"]["sha256"] == result["unrolled"]["sha256"]
    emit(result, args.out)
    return 0 if result["same_bits"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
