"""Epinet in the CIFAR study: a small network on the base network's features and logits, trained
per prior scale; ``n_samples`` sampled indices, the prior scale selected on validation."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

from pnc.core.classifier import baselines as B
from pnc.core.classifier.model import features_and_logits
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs


@dataclasses.dataclass(frozen=True)
class EpinetSection(MethodSection):
    """Epinet: ``n_samples`` sampled indices per prior scale (``grid``); the network and its
    training (defaults: :class:`pnc.core.classifier.baselines.EpinetConfig`'s)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("prior_scale",)
    n_samples: int = 50
    index_dim: int = B.EpinetConfig.index_dim
    hiddens: tuple[int, ...] = B.EpinetConfig.hiddens
    epochs: int = B.EpinetConfig.epochs
    lr: float = B.EpinetConfig.lr
    weight_decay: float = B.EpinetConfig.weight_decay
    batch_size: int = B.EpinetConfig.batch_size
    index_samples: int = B.EpinetConfig.index_samples

    def network(self, prior_scale: float) -> B.EpinetConfig:
        """The epinet of one configuration."""
        fields = [f.name for f in dataclasses.fields(B.EpinetConfig) if f.name != "prior_scale"]
        return B.EpinetConfig(prior_scale=prior_scale, **{k: getattr(self, k) for k in fields})


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
            params, prior = B.train_epinet(
                f_train, lg_train, ctx.train_y, cfg, self.key(ctx, scale)
            )

            def logits_of(x):
                f, lg = base_of(x)
                return B.epinet_logits(params, prior, f, lg, cfg, n, self.key(ctx, "index"))

            return logits_of

        return [
            ({"prior_scale": scale}, functools.partial(build, scale))
            for scale in config.values("prior_scale")
        ]
