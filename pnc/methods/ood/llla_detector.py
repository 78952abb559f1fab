"""Last-layer Laplace (LLLA) in the CIFAR study: a Gaussian over the dense head of the base
network; ``n_samples`` sampled heads per prior precision, the precision selected on validation.

The posterior: a Kronecker-factored generalised Gauss-Newton of the dense head (weights and bias,
features augmented with 1) at the trained head on the training split, ``H = N (A (x) G)`` with
``A = mean phi phi^T`` and ``G = mean (diag p - p p^T)``, posterior precision ``H + prior I``;
members are head weights sampled from the Gaussian (:class:`LastLayerLaplace`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.classifier.model import features_and_logits, head
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class LastLayerLaplace:
    """KFAC GGN factors of the head: eigen-decompositions of ``A`` and ``G``, ``N``, the MAP."""

    a_vals: np.ndarray
    a_vecs: np.ndarray
    g_vals: np.ndarray
    g_vecs: np.ndarray
    n: int
    w_map: np.ndarray  # [D + 1, K] (weights over the bias row)

    @classmethod
    def fit(cls, variables, train_features) -> LastLayerLaplace:
        f = np.asarray(train_features, np.float64)
        phi = np.concatenate([f, np.ones((f.shape[0], 1))], axis=1)
        p = np.asarray(jax.nn.softmax(head(variables, jnp.asarray(f, jnp.float32))), np.float64)
        a = phi.T @ phi / f.shape[0]
        g = np.diag(p.mean(axis=0)) - p.T @ p / f.shape[0]
        a_vals, a_vecs = np.linalg.eigh(a)
        g_vals, g_vecs = np.linalg.eigh(g)
        hp = variables["params"]["head"]
        w_map = np.concatenate([np.asarray(hp["kernel"]), np.asarray(hp["bias"])[None]], axis=0)
        return cls(
            np.clip(a_vals, 0, None), a_vecs, np.clip(g_vals, 0, None), g_vecs, f.shape[0], w_map
        )

    def sample_heads(self, prior_precision: float, n_samples: int, key: Array) -> np.ndarray:
        """``[S, D + 1, K]`` head weights from ``N(w_map, (N A (x) G + prior I)^-1)``."""
        if prior_precision <= 0:
            raise ValueError(f"prior_precision must be > 0, got {prior_precision}")
        eps = np.asarray(jax.random.normal(key, (n_samples, *self.w_map.shape)), np.float64)
        scale = 1.0 / np.sqrt(self.n * np.outer(self.a_vals, self.g_vals) + prior_precision)
        draws = self.a_vecs @ (eps * scale) @ self.g_vecs.T
        return (self.w_map[None] + draws).astype(np.float32)


def laplace_logits(feats, heads) -> np.ndarray:
    """Member logits ``[S, N, K]`` of sampled heads ``[S, D + 1, K]`` on features ``[N, D]``."""
    f = jnp.asarray(feats, jnp.float32)
    h = jnp.asarray(heads)
    return np.asarray(jnp.einsum("nd,sdk->snk", f, h[:, :-1]) + h[:, None, -1])


@dataclasses.dataclass(frozen=True)
class LLLASection(MethodSection):
    """Last-layer Laplace: ``n_samples`` sampled heads per prior precision (``grid``)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("prior_precision",)
    n_samples: int = 50


class LLLADetector(PosthocMethod):
    """Last-layer Laplace on the base run."""

    id: ClassVar[str] = "llla"
    label: ClassVar[str] = "LLLA"
    config_cls: ClassVar[type[MethodSection]] = LLLASection

    def candidates(self, config: LLLASection, ctx: Context, runs: Runs) -> list:
        v = runs["base"].variables
        fitted: list = []  # the posterior, fitted once on the training split when first built
        cache: dict[int, np.ndarray] = {}

        def feats(x):
            if id(x) not in cache:
                cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)[0]
            return cache[id(x)]

        def build(prior):
            if not fitted:
                f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
                fitted.append(LastLayerLaplace.fit(v, f_train))
            heads = fitted[0].sample_heads(float(prior), config.n_samples, self.key(ctx, prior))
            return lambda x: laplace_logits(feats(x), heads)

        return [
            ({"prior_precision": prior}, functools.partial(build, prior))
            for prior in config.values("prior_precision")
        ]
