"""JAX's Threefry-2x32 random bits on CPU, 6 to 24 times faster and bit for bit the same.

Every JAX random draw (``jax.random.bits``, ``uniform``, ``normal``, ``bernoulli``, Flax's
dropout masks) hashes a counter with Threefry-2x32 (Salmon et al., 2011: 20 rounds of add,
rotate and xor on pairs of 32-bit words, a key injection after every fourth). On CPU, JAX lowers
the hash with its five groups of rounds as a loop (``fori_loop``) to keep programs small; XLA then
runs each group over the whole array, one pass through memory per group, with the rotation
amounts in the loop state instead of constants. On this project's Xeon that draws about 43 M
numbers per CPU second. The same hash written out (every round and rotation a constant,
:func:`threefry2x32`) fuses into one vectorised loop: 250-980 M per CPU second
(``python -m bench.mask_draws``), and the same integers, since the hash is exact integer
arithmetic. With ``jax_threefry_partitionable`` off (not JAX's default) JAX lays the counters out
differently, and :func:`random_bits` then draws with JAX itself.

:func:`random_bits` and :func:`bernoulli` draw ``jax.random.bits`` and ``jax.random.bernoulli``
with it, bit for bit (``tests/test_threefry.py``); the MLP's dropout (:class:`pnc.core.mlp.Dropout`)
draws its masks with :func:`bernoulli`, which is most of MC Dropout's cost (800 mask entries per
row and pass; ``docs/performance.md``). Only the masks are drawn this way. Registering the
unrolled hash as JAX's CPU lowering of its ``threefry2x32`` primitive, for every draw of a process,
gives the same random numbers too, but XLA then fuses them differently into the code that consumes
them: in the quick default P&C's normalised perturbations changed in their last bits, and with
them P&C's tables, while the training runs and every other method's tables stayed the same.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROTATIONS", "bernoulli", "random_bits", "threefry2x32"]

#: Rotation amounts of Threefry-2x32's rounds: the first tuple for groups 0, 2, 4, the second for 1, 3.
ROTATIONS: tuple[tuple[int, ...], tuple[int, ...]] = ((13, 15, 26, 6), (17, 29, 16, 24))

#: The key schedule's parity constant (Threefish's C240 for 32-bit words).
_PARITY = np.uint32(0x1BD11BDA)


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


def _key_words(key):
    """The two uint32 words of a Threefry key: a typed key (``jax.random.key``) or a raw one
    (``jax.random.PRNGKey``, ``uint32[2]``)."""
    import jax

    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        impl = jax.random.key_impl(key)
        if "threefry" not in str(impl):
            raise ValueError(f"pnc.core.threefry draws with Threefry keys only, got a {impl} key")
        key = jax.random.key_data(key)
    if key.shape[-1:] != (2,) or key.dtype != np.uint32:
        raise ValueError(f"a raw Threefry key is uint32[2], got {key.dtype}{list(key.shape)}")
    return key[..., 0], key[..., 1]


def random_bits(key, shape: tuple[int, ...]):
    """``jax.random.bits(key, shape, uint32)``, bit for bit (JAX's default, partitionable
    Threefry: each element hashes its row-major index), with the unrolled hash.

    Args:
        key: one Threefry key, typed or raw (under ``vmap``, one per batch element).
        shape: the output shape; at most ``2**32 - 1`` elements.

    Returns:
        ``uint32[shape]``.
    """
    import jax
    from jax import lax

    if not jax.config.jax_threefry_partitionable:  # JAX's other counter layout: its own draw
        return jax.random.bits(key, shape, np.uint32)
    n = int(np.prod(shape, dtype=np.int64))
    if n >= 2**32:
        raise ValueError(f"random_bits draws fewer than 2**32 numbers, got shape {shape}")
    k0, k1 = _key_words(key)
    lo = lax.iota(np.uint32, n)
    y0, y1 = threefry2x32(k0, k1, np.zeros((), np.uint32), lo)
    return (y0 ^ y1).reshape(shape)


def bernoulli(key, p: float, shape: tuple[int, ...]):
    """``jax.random.bernoulli(key, p, shape)`` (float32 ``p``, JAX's default ``mode="low"``),
    bit for bit, with the unrolled hash: ``True`` where the uniform number that
    ``jax.random.uniform`` makes from the element's bits is below ``p``.

    Returns:
        ``bool[shape]``.
    """
    from jax import lax

    bits = random_bits(key, shape)
    one = np.array(1.0, np.float32).view(np.uint32)
    floats = lax.bitcast_convert_type((bits >> np.uint32(32 - 23)) | one, np.float32)
    return floats - np.float32(1.0) < np.float32(p)
