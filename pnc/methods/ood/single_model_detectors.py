"""The single-model scores of the CIFAR study: MSP, Energy, Mahalanobis and ReAct+Energy, each
read off the base network with no selection (no candidates, an empty sweep: each overrides
:meth:`~pnc.methods.ood.posthoc.PosthocMethod.score` only; a family in one module: they share their
outputs, :func:`pnc.methods.ood.posthoc.single_score`)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pnc.core.classifier import baselines as B
from pnc.core.classifier.model import features_and_logits
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs, single_score


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

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        return single_score(ctx, runs["base"].variables, lambda f, lg: B.msp(lg)), {}


class EnergyDetector(PosthocMethod):
    """The energy score (logsumexp of the base logits)."""

    id: ClassVar[str] = "energy"
    label: ClassVar[str] = "Energy"
    config_cls: ClassVar[type[MethodSection]] = SingleScoreSection

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        return single_score(ctx, runs["base"].variables, lambda f, lg: B.energy(lg)), {}


class MahalanobisDetector(PosthocMethod):
    """Class-conditional Gaussians with a shared covariance on the base network's features."""

    id: ClassVar[str] = "mahalanobis"
    label: ClassVar[str] = "Mahalanobis"
    config_cls: ClassVar[type[MethodSection]] = SingleScoreSection

    def score(self, config, ctx: Context, runs: Runs, chosen=None) -> tuple[dict, dict]:
        v = runs["base"].variables
        f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
        maha = B.Mahalanobis.fit(f_train, ctx.train_y, ctx.config.num_classes)
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
        c = B.react_threshold(f_train, pct)
        clipped = lambda f: B.react_energy(v, f, c)[1]
        out = single_score(ctx, v, lambda f, lg: B.react_energy(v, f, c)[0], clipped)
        return out, {"config": {"percentile": pct, "threshold": c}}
