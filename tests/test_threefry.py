"""The unrolled Threefry lowering (pnc.threefry) draws JAX's random numbers bit for bit.

A lowering rule applies to every function traced after it is registered, process-wide, so the
draws of JAX's own lowering come from a separate process that never registers it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: Draws of every kind the study makes (bits, uniform, normal, bernoulli masks as Flax's dropout
#: draws them, split and fold_in keys, randint, permutation, typed and raw keys, under jit and
#: vmap), hashed per draw.
DRAWS = r"""
import hashlib, json, sys
import jax, numpy as np
if sys.argv[1] == "unrolled":
    from pnc.threefry import use_unrolled_on_cpu
    assert use_unrolled_on_cpu()
key, raw = jax.random.key(7), jax.random.PRNGKey(2**40 + 3)
draws = {
    "bits": jax.random.bits(key, (301, 200), np.uint32),
    "bits_odd": jax.random.bits(raw, (7, 3, 5), np.uint32),
    "uniform": jax.random.uniform(key, (1001, 3)),
    "normal": jax.random.normal(raw, (17, 5, 3)),
    "bernoulli": jax.random.bernoulli(key, 0.9, (64, 200)),
    "split": jax.random.key_data(jax.random.split(key, 7)),
    "fold_in": jax.random.key_data(jax.random.fold_in(key, 5)),
    "vmap_jit": jax.jit(
        lambda k: jax.vmap(lambda kk: jax.random.normal(kk, (9,)))(jax.random.split(k, 4))
    )(key),
    "randint": jax.random.randint(key, (100,), 0, 1000),
    "permutation": jax.random.permutation(key, 50),
    "scalar": jax.random.uniform(key, ()),
}
print(json.dumps({k: hashlib.sha256(np.asarray(v).tobytes()).hexdigest() for k, v in draws.items()}))
"""


def _draws(mode: str) -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", DRAWS, mode], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_unrolled_lowering_draws_jax_bits():
    default, unrolled = _draws("default"), _draws("unrolled")
    assert set(default) == set(unrolled)
    differ = [k for k in default if default[k] != unrolled[k]]
    assert not differ, f"draws differ under the unrolled lowering: {differ}"


def test_hash_matches_the_published_test_vectors():
    """Random123's known-answer vectors for Threefry-2x32 with 20 rounds (kat_vectors)."""
    from pnc.threefry import threefry2x32

    u32 = np.uint32
    cases = [
        ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
        ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
        ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
    ]
    for (k0, k1), (x0, x1), expected in cases:
        y = threefry2x32(u32(k0), u32(k1), np.array([x0], u32), np.array([x1], u32))
        assert (int(y[0][0]), int(y[1][0])) == expected


def test_registration_is_idempotent():
    from pnc.threefry import use_unrolled_on_cpu

    assert use_unrolled_on_cpu() and use_unrolled_on_cpu()


def test_benchmark_reports_both_lowerings_with_the_same_bits(tmp_path, capsys):
    from pnc.bench.threefry import main

    out = tmp_path / "threefry.json"
    assert main(["--rows", "64", "--width", "8", "--repeats", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["same_bits"] is True
    for mode in ("jax", "unrolled"):
        assert result[mode]["numbers"] == 64 * 8 * 2 and result[mode]["cpu_s"] > 0
    assert json.loads(capsys.readouterr().out) == result
