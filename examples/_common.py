"""Helpers shared by the examples: generated images, timing, AUROC."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import numpy as np

from pnc.core.roc import auroc

__all__ = ["auroc", "bar_images", "timed"]


def bar_images(n: int, size: int, seed: int, noise: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """``n`` single-channel images ``[n, size, size, 1]`` of three classes of stripes
    (horizontal, vertical, diagonal) with a random period and phase plus Gaussian noise, and the
    labels ``[n]``. Deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    grid = np.arange(size, dtype=np.float32)
    rows, cols = np.meshgrid(grid, grid, indexing="ij")
    period = rng.uniform(3.0, 6.0, n)[:, None, None]
    phase = rng.uniform(0.0, 2 * np.pi, n)[:, None, None]
    coord = np.where(
        labels[:, None, None] == 0, rows, np.where(labels[:, None, None] == 1, cols, rows + cols)
    )
    images = np.sin(2 * np.pi * coord / period + phase)
    images = images + noise * rng.standard_normal(images.shape)
    return images[..., None].astype(np.float32), labels.astype(np.int32)


def timed(fn: Callable, *args, repeats: int = 5) -> float:
    """Best wall-clock seconds of ``fn(*args)`` over ``repeats`` calls after a compiling call."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return best
