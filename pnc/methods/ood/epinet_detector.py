"""Epinet in the CIFAR study: a small network on the base network's features and logits, trained
per prior scale; ``n_samples`` sampled indices, the prior scale selected on validation.

Epinet (Osband et al., 2023) on the frozen base: ``f(x, z) = logits(x) + e(phi(x), z) +
s p(phi(x), z)`` with ``phi`` the penultimate features, ``z ~ N(0, I_d)`` the epistemic index,
``e`` a trained MLP and ``p`` a fixed random MLP of the same shape scaled by ``s`` (prior scale);
each maps ``concat(phi, z)`` through hidden layers to a ``K x d`` matrix contracted with ``z``.
Trained with AdamW on the cross-entropy averaged over sampled indices.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from pnc.core.classifier.model import features_and_logits
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs

Array = jax.Array


class EpinetMLP(nn.Module):
    """``concat(phi, z)`` -> hidden ReLU layers -> ``K x d`` matrix, contracted with ``z``."""

    hiddens: tuple[int, ...]
    num_classes: int
    index_dim: int

    @nn.compact
    def __call__(self, phi: Array, z: Array) -> Array:
        h = jnp.concatenate([phi, jnp.broadcast_to(z, phi.shape[:-1] + z.shape[-1:])], axis=-1)
        for width in self.hiddens:
            h = nn.relu(nn.Dense(width)(h))
        out = nn.Dense(self.num_classes * self.index_dim)(h)
        out = out.reshape(*out.shape[:-1], self.num_classes, self.index_dim)
        return jnp.einsum("...kd,...d->...k", out, z)


@dataclasses.dataclass(frozen=True)
class EpinetConfig:
    """Epinet hyperparameters (paper grid: prior scale {0.5, 1, 3}; the rest fixed)."""

    prior_scale: float = 3.0
    index_dim: int = 8
    hiddens: tuple[int, ...] = (50, 50)
    epochs: int = 100
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 128
    index_samples: int = 8


def train_epinet(train_features, train_logits, labels, cfg: EpinetConfig, key: Array):
    """``(trained params, prior params)`` of the epinet on frozen base features and logits."""
    f = jnp.asarray(train_features, jnp.float32)
    base = jnp.asarray(train_logits, jnp.float32)
    y = jnp.asarray(labels, jnp.int32)
    k_init, k_prior, k_train = jax.random.split(key, 3)
    net = EpinetMLP(tuple(cfg.hiddens), base.shape[1], cfg.index_dim)
    z0 = jnp.zeros((cfg.index_dim,))
    params = net.init(k_init, f[:1], z0)
    prior = net.init(k_prior, f[:1], z0)
    steps = max(1, f.shape[0] // cfg.batch_size)
    batch = min(cfg.batch_size, f.shape[0])
    trained = _train_epinet(params, prior, f, base, y, k_train, cfg=cfg, steps=steps, batch=batch)
    return trained, prior


@functools.partial(jax.jit, static_argnames=("cfg", "steps", "batch"))
def _train_epinet(params, prior, f, base, y, key, *, cfg, steps, batch):
    net = EpinetMLP(tuple(cfg.hiddens), base.shape[1], cfg.index_dim)
    tx = optax.adamw(cfg.lr, weight_decay=cfg.weight_decay)

    def loss_fn(p, rows, z):
        def one(zi):
            out = (
                base[rows]
                + net.apply(p, f[rows], zi)
                + cfg.prior_scale * net.apply(prior, f[rows], zi)
            )
            return optax.softmax_cross_entropy_with_integer_labels(out, y[rows]).mean()

        return jnp.mean(jax.vmap(one)(z))

    def epoch(carry, k):
        k_perm, k_z = jax.random.split(k)
        perm = jax.random.permutation(k_perm, f.shape[0])[: steps * batch]
        zs = jax.random.normal(k_z, (steps, cfg.index_samples, cfg.index_dim))

        def step(c, inputs):
            p, s = c
            rows, z = inputs
            grads = jax.grad(loss_fn)(p, rows, z)
            updates, s = tx.update(grads, s, p)
            return (optax.apply_updates(p, updates), s), None

        carry, _ = jax.lax.scan(step, carry, (perm.reshape(steps, batch), zs))
        return carry, None

    carry = (params, tx.init(params))
    (params, _), _ = jax.lax.scan(epoch, carry, jax.random.split(key, cfg.epochs))
    return params


def epinet_logits(params, prior, feats, base_logits, cfg: EpinetConfig, n_samples: int, key):
    """``[S, N, K]`` for ``S`` sampled indices (one index per member, shared over images)."""
    net = EpinetMLP(tuple(cfg.hiddens), base_logits.shape[1], cfg.index_dim)
    f = jnp.asarray(feats, jnp.float32)
    zs = jax.random.normal(key, (n_samples, cfg.index_dim))
    one = lambda z: (
        jnp.asarray(base_logits)
        + net.apply(params, f, z)
        + cfg.prior_scale * net.apply(prior, f, z)
    )
    return np.asarray(jax.lax.map(one, zs))


@dataclasses.dataclass(frozen=True)
class EpinetSection(MethodSection):
    """Epinet: ``n_samples`` sampled indices per prior scale (``grid``); the network and its
    training (defaults: :class:`EpinetConfig`'s)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("prior_scale",)
    n_samples: int = 50
    index_dim: int = EpinetConfig.index_dim
    hiddens: tuple[int, ...] = EpinetConfig.hiddens
    epochs: int = EpinetConfig.epochs
    lr: float = EpinetConfig.lr
    weight_decay: float = EpinetConfig.weight_decay
    batch_size: int = EpinetConfig.batch_size
    index_samples: int = EpinetConfig.index_samples

    def network(self, prior_scale: float) -> EpinetConfig:
        """The epinet of one configuration."""
        fields = [f.name for f in dataclasses.fields(EpinetConfig) if f.name != "prior_scale"]
        return EpinetConfig(prior_scale=prior_scale, **{k: getattr(self, k) for k in fields})


class EpinetDetector(PosthocMethod):
    """An epinet trained on the base run's training-split features."""

    id: ClassVar[str] = "epinet"
    label: ClassVar[str] = "Epinet"
    config_cls: ClassVar[type[MethodSection]] = EpinetSection

    def candidates(self, config: EpinetSection, ctx: Context, runs: Runs) -> list:
        v = runs["base"].variables
        n = config.n_samples
        train: list = []  # the training split's features and logits, computed when first needed
        cache = {}

        def base_of(x):
            if id(x) not in cache:
                cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)
            return cache[id(x)]

        def build(scale):
            if not train:
                train.append(features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size))
            (f_train, lg_train), cfg = train[0], config.network(float(scale))
            params, prior = train_epinet(f_train, lg_train, ctx.train_y, cfg, self.key(ctx, scale))

            def logits_of(x):
                f, lg = base_of(x)
                return epinet_logits(params, prior, f, lg, cfg, n, self.key(ctx, "index"))

            return logits_of

        return [
            ({"prior_scale": scale}, functools.partial(build, scale))
            for scale in config.values("prior_scale")
        ]
