"""The single-model scores of the CIFAR study: MSP, Energy, Mahalanobis and ReAct+Energy, each
read off the base network with no selection (no candidates, an empty sweep: each overrides
:meth:`~pnc.methods.ood.posthoc.PosthocMethod.score` only; a family in one module: they share their
outputs, :func:`pnc.methods.ood.posthoc.single_score`). Each is a *confidence* (larger = more
in-distribution; no temperature):

- MSP (Hendrycks and Gimpel, 2017): ``max_k softmax(logits)_k``.
- Energy (Liu et al., 2020): ``logsumexp_k logits_k`` (minus the free energy at ``T = 1``).
- Mahalanobis (Lee et al., 2018): class means and one shared covariance of the penultimate
  features of the training split; confidence ``-min_c (f - mu_c)^T Sigma^+ (f - mu_c)``.
- ReAct+Energy (Sun et al., 2021): the penultimate features clipped at their 90th percentile over
  the training split (all units, all images), then the energy of the head's logits.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.classifier.model import features_and_logits, head
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs, single_score


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


@dataclasses.dataclass(frozen=True)
class SingleScoreSection(MethodSection):
    """MSP, Energy, Mahalanobis: no settings, no selection."""


@dataclasses.dataclass(frozen=True)
class ReActSection(MethodSection):
    """ReAct+Energy: the clip at the ``percentile``-th percentile of the training split's
    penultimate activations (ReAct: 90)."""

    percentile: float = 90.0


class MSPDetector(PosthocMethod):
    """Maximum softmax probability of the base network."""

    id: ClassVar[str] = "msp"
    label: ClassVar[str] = "MSP"
    config_cls: ClassVar[type[MethodSection]] = SingleScoreSection
    authors_entropy_fpr95: ClassVar[bool] = True

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        return single_score(ctx, runs["base"].variables, lambda f, lg: msp(lg)), {}


class EnergyDetector(PosthocMethod):
    """The energy score (logsumexp of the base logits)."""

    id: ClassVar[str] = "energy"
    label: ClassVar[str] = "Energy"
    config_cls: ClassVar[type[MethodSection]] = SingleScoreSection
    authors_entropy_fpr95: ClassVar[bool] = True

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        return single_score(ctx, runs["base"].variables, lambda f, lg: energy(lg)), {}


class MahalanobisDetector(PosthocMethod):
    """Class-conditional Gaussians with a shared covariance on the base network's features."""

    id: ClassVar[str] = "mahalanobis"
    label: ClassVar[str] = "Mahalanobis"
    config_cls: ClassVar[type[MethodSection]] = SingleScoreSection
    authors_entropy_fpr95: ClassVar[bool] = True

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        v = runs["base"].variables
        f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
        maha = Mahalanobis.fit(f_train, ctx.train_y, ctx.config.num_classes)
        return single_score(ctx, v, lambda f, lg: maha.confidence(f)), {}


class ReActEnergyDetector(PosthocMethod):
    """The energy of the head on features clipped at a percentile of the training split's."""

    id: ClassVar[str] = "react_energy"
    label: ClassVar[str] = "ReAct+Energy"
    config_cls: ClassVar[type[MethodSection]] = ReActSection

    def score(
        self, config: ReActSection, ctx: Context, runs: Runs, chosen=None
    ) -> tuple[dict, dict]:
        v = runs["base"].variables
        pct = config.percentile
        f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
        c = react_threshold(f_train, pct)
        clipped = lambda f: react_energy(v, f, c)[1]
        out = single_score(ctx, v, lambda f, lg: react_energy(v, f, c)[0], clipped)
        return out, {"config": {"percentile": pct, "threshold": c}}
