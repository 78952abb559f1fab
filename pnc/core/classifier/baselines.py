"""The CIFAR-10 OOD baselines on a trained PreAct ResNet (paper, Section 5.4, Appendix D).

Single-model scores (a *confidence*: larger = more in-distribution; no temperature):

- MSP (Hendrycks and Gimpel, 2017): ``max_k softmax(logits)_k``.
- Energy (Liu et al., 2020): ``logsumexp_k logits_k`` (minus the free energy at ``T = 1``).
- Mahalanobis (Lee et al., 2018): class means and one shared covariance of the penultimate
  features of the training split; confidence ``-min_c (f - mu_c)^T Sigma^+ (f - mu_c)``.
- ReAct+Energy (Sun et al., 2021): the penultimate features clipped at their 90th percentile over
  the training split (all units, all images), then the energy of the head's logits.

Ensembles (member logits ``[M, N, K]``; one temperature per configuration, mixture-entropy score,
as for P&C):

- Last-layer Laplace (LLLA): a Kronecker-factored generalised Gauss-Newton of the dense head
  (weights and bias, features augmented with 1) at the trained head on the training split,
  ``H = N (A (x) G)`` with ``A = mean phi phi^T`` and ``G = mean (diag p - p p^T)``, posterior
  precision ``H + prior I``; members are head weights sampled from the Gaussian.
- MC Dropout: the features of a run trained with dropout before the head, dropped at prediction
  with a fresh mask per member and image.
- SWAG (Maddox et al., 2019): ``w = mean + sqrt(diag / 2) z_1 + D z_2 / sqrt(2 (R - 1))`` from the
  moments collected during training (:mod:`pnc.core.classifier.recipe`), sampled by the CIFAR rule of
  :mod:`pnc.core.swag_gaussian`; the BN statistics of every sample
  are recomputed on a fixed subset of training images (the mean over batches of their batch
  statistics).
- Epinet (Osband et al., 2023): on the frozen base, ``f(x, z) = logits(x) + e(phi(x), z) +
  s p(phi(x), z)`` with ``phi`` the penultimate features, ``z ~ N(0, I_d)`` the epistemic index,
  ``e`` a trained MLP and ``p`` a fixed random MLP of the same shape scaled by ``s`` (prior
  scale); each maps ``concat(phi, z)`` through hidden layers to a ``K x d`` matrix contracted with
  ``z``. Trained with AdamW on the cross-entropy averaged over sampled indices.
- Deep Ensemble: independently trained runs.
"""

from __future__ import annotations

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from pnc.core.classifier.model import Classifier, batched, features, head, normalize
from pnc.core.conv.resnet import BN_MOMENTUM, ResNetConfig
from pnc.core.swag_gaussian import swag_sample_split_keys

Array = jax.Array


# ----------------------------------------------------------------------------- single-model scores


def msp(logits) -> np.ndarray:
    return np.asarray(jnp.max(jax.nn.softmax(jnp.asarray(logits), axis=-1), axis=-1))


def energy(logits) -> np.ndarray:
    return np.asarray(jax.scipy.special.logsumexp(jnp.asarray(logits), axis=-1))


@dataclasses.dataclass(frozen=True)
class Mahalanobis:
    """Class means ``[K, D]`` and the pseudo-inverse of the shared covariance ``[D, D]``."""

    means: np.ndarray
    precision: np.ndarray

    @classmethod
    def fit(cls, feats, labels, num_classes: int) -> Mahalanobis:
        f = np.asarray(feats, np.float64)
        labels = np.asarray(labels)
        missing = sorted(set(range(num_classes)) - set(labels.tolist()))
        if missing:
            raise ValueError(f"Mahalanobis: no training features of class(es) {missing}")
        means = np.stack([f[labels == c].mean(axis=0) for c in range(num_classes)])
        centred = f - means[labels]
        cov = centred.T @ centred / f.shape[0]
        return cls(means, np.linalg.pinv(cov, hermitian=True))

    def confidence(self, feats) -> np.ndarray:
        """``-min_c`` squared Mahalanobis distance to the class means, ``[N]``."""
        f = np.asarray(feats, np.float64)
        fp = f @ self.precision
        mp = self.means @ self.precision
        # (f - mu)^T P (f - mu) = f^T P f - 2 f^T P mu + mu^T P mu, for every class at once
        dist = np.sum(fp * f, axis=1)[:, None] - 2 * fp @ self.means.T + np.sum(mp * self.means, 1)
        return -dist.min(axis=1)


def react_threshold(train_features, percentile: float = 90.0) -> float:
    """The clip value: the ``percentile``-th percentile of all training-split activations."""
    return float(np.percentile(np.asarray(train_features), percentile))


def react_energy(variables, feats, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """``(energy confidence, logits)`` of the head on features clipped at ``threshold``."""
    logits = head(variables, jnp.minimum(jnp.asarray(feats), threshold))
    return energy(logits), np.asarray(logits)


# ----------------------------------------------------------------------------- last-layer Laplace


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


# ----------------------------------------------------------------------------- MC Dropout


def dropout_logits(variables, feats, rate: float, n_samples: int, key: Array) -> np.ndarray:
    """``[S, N, K]``: the head on features dropped with ``rate`` (inverted scaling)."""
    f = jnp.asarray(feats, jnp.float32)
    keep = jax.random.bernoulli(key, 1.0 - rate, (n_samples, *f.shape))
    return np.asarray(head(variables, jnp.where(keep, f / (1.0 - rate), 0.0)))


# ----------------------------------------------------------------------------- SWAG


def swag_sample(moments: dict, params_template, key: Array, rank: int | None = None):
    """One parameter pytree ``mean + sqrt(diag/2) z1 + D^T z2 / sqrt(2 (R - 1))`` from the moments
    of the base run (:func:`pnc.core.swag_gaussian.swag_sample_split_keys`): ``diag`` from the running
    first and second moments, ``D`` the filled rows of the deviation buffer, the first ``rank``."""
    n = int(moments["n"])
    if n < 2:
        raise ValueError(f"SWAG needs >= 2 collected epochs, got {n}")
    mean = jnp.asarray(moments["mean"])
    var = jnp.asarray(moments["sq_mean"]) - mean**2
    dev = jnp.asarray(moments["dev"])[: min(n, moments["dev"].shape[0])]
    if rank is not None:
        dev = dev[:rank]
    w = swag_sample_split_keys(mean, var, dev, key)
    _, unravel = ravel_pytree(params_template)
    return unravel(w)


@functools.partial(jax.jit, static_argnames=("config", "batch_size"))
def refresh_batch_stats(params, batch_stats, x_uint8, *, config: ResNetConfig, batch_size: int):
    """BN statistics of ``params`` recomputed on ``x_uint8``: the mean over batches of ``batch_size``
    images of each BN layer's batch mean and (biased) variance."""
    model = Classifier(config)
    n_batches = x_uint8.shape[0] // batch_size
    xs = x_uint8[: n_batches * batch_size].reshape(n_batches, batch_size, *x_uint8.shape[1:])
    zeros = jax.tree.map(jnp.zeros_like, batch_stats)

    def one(xb):
        _, updated = model.apply(
            {"params": params, "batch_stats": zeros},
            normalize(xb),
            train=True,
            mutable=["batch_stats"],
        )
        # running = momentum * 0 + (1 - momentum) * batch statistic
        return jax.tree.map(lambda s: s / (1.0 - BN_MOMENTUM), updated["batch_stats"])

    stats = jax.lax.map(one, xs)
    return jax.tree.map(lambda s: jnp.mean(s, axis=0), stats)


@functools.partial(jax.jit, static_argnames=("config",))
def _logits(variables, x_uint8, config):
    return head(variables, features(variables, normalize(x_uint8), config))


def network_logits(variables, x_uint8, config: ResNetConfig, batch_size: int = 500) -> np.ndarray:
    return batched(lambda xb: _logits(variables, xb, config), x_uint8, batch_size)


# ----------------------------------------------------------------------------- Epinet


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
