"""Last-layer Laplace (LLLA) in the CIFAR study: a Gaussian over the dense head of the base
network; ``n_samples`` sampled heads per prior precision, the precision selected on validation."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import numpy as np

from pnc.core.classifier import baselines as B
from pnc.core.classifier.model import features_and_logits
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs


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
                fitted.append(B.LastLayerLaplace.fit(v, f_train))
            heads = fitted[0].sample_heads(float(prior), config.n_samples, self.key(ctx, prior))
            return lambda x: B.laplace_logits(feats(x), heads)

        return [
            ({"prior_precision": prior}, functools.partial(build, prior))
            for prior in config.values("prior_precision")
        ]
