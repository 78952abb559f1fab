"""JAX's Threefry-2x32 random bits on CPU, five times faster and bit for bit the same.

Every JAX random draw (``jax.random.bits``, ``uniform``, ``normal``, ``bernoulli``, Flax's
dropout masks, key splits) hashes a counter with Threefry-2x32 (Salmon et al., 2011: 20 rounds
of add, rotate and xor on pairs of 32-bit words, a key injection after every fourth). On CPU, JAX
lowers the hash with its five groups of rounds as a loop (``fori_loop``) to keep programs small;
XLA then runs each group over the whole array, one pass through memory per group, and the
rotation amounts ride in the loop state instead of being constants. On this project's Xeon that
draws about 43 M numbers per CPU second. The same hash written out in full (every round and
rotation a constant) fuses into one vectorised loop: about 246 M per CPU second, and the same
integers, since the hash is exact integer arithmetic. MC Dropout, whose 100 passes draw 800 mask
entries per row and pass, spends most of its time here (``docs/performance.md``).

:func:`use_unrolled_on_cpu` registers the unrolled form as the CPU lowering of JAX's
``threefry2x32`` primitive (``jax.extend.random.threefry2x32_p``). It must run before the
first random function is traced in the process (a function already compiled keeps its program);
every workflow job calls it at start-up (:func:`pnc.workflow.limit_threads`). Draws do not change:
``tests/test_threefry.py`` compares them with JAX's own lowering in a separate process.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROTATIONS", "threefry2x32", "use_unrolled_on_cpu"]

#: Rotation amounts of Threefry-2x32's rounds: the first tuple for groups 0, 2, 4, the second for 1, 3.
ROTATIONS: tuple[tuple[int, ...], tuple[int, ...]] = ((13, 15, 26, 6), (17, 29, 16, 24))

#: The key schedule's parity constant (Threefish's C240 for 32-bit words).
_PARITY = np.uint32(0x1BD11BDA)

_installed = False


def _rotate_left(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 with 20 rounds of the uint32 counter words ``(x0, x1)`` under the key
    ``(k0, k1)`` (arrays that broadcast together, uint32).

    Written with constant rotations and no loop, so that XLA fuses it into one pass.

    Returns:
        ``(y0, y1)``, uint32, the broadcast shape.
    """
    keys = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0 = x0 + keys[0]
    x1 = x1 + keys[1]
    for group in range(5):
        for r in ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotate_left(x1, r)
            x1 = x0 ^ x1
        x0 = x0 + keys[(group + 1) % 3]
        x1 = x1 + keys[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


def use_unrolled_on_cpu() -> bool:
    """Lower JAX's ``threefry2x32`` primitive with :func:`threefry2x32` on CPU (idempotent).

    Returns:
        Whether the lowering is registered (``False`` only where this JAX lacks the public
        ``jax.extend.random.threefry2x32_p`` or ``jax.interpreters.mlir.register_lowering``;
        JAX's own lowering then stays, and draws are the same, only slower).
    """
    global _installed
    if _installed:
        return True
    try:
        from jax.extend.random import threefry2x32_p
        from jax.interpreters import mlir
    except ImportError:  # pragma: no cover - depends on the JAX version
        return False
    rule = mlir.lower_fun(threefry2x32, multiple_results=True)
    mlir.register_lowering(threefry2x32_p, rule, platform="cpu")
    _installed = True
    return True
