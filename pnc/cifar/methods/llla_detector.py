"""Last-layer Laplace (LLLA) in the CIFAR study: a Gaussian over the dense head of the base
network; ``n_samples`` sampled heads per prior precision, the precision selected on validation."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import numpy as np

from pnc.cifar import baselines as B
from pnc.cifar.model import features_and_logits
from pnc.cifar.posthoc import Context, MethodSection, PosthocMethod, Runs


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

    def run(self, config: LLLASection, ctx: Context, runs: Runs) -> tuple[dict, dict]:
        v = runs["base"].variables
        f_train, _ = features_and_logits(v, ctx.train_x, ctx.config, ctx.batch_size)
        laplace = B.LastLayerLaplace.fit(v, f_train)
        cache: dict[int, np.ndarray] = {}

        def feats(x):
            if id(x) not in cache:
                cache[id(x)] = features_and_logits(v, x, ctx.config, ctx.batch_size)[0]
            return cache[id(x)]

        candidates = []
        for prior in config.values("prior_precision"):
            heads = laplace.sample_heads(float(prior), config.n_samples, self.key(ctx, prior))
            logits_of = lambda x, h=heads: B.laplace_logits(feats(x), h)
            candidates.append(({"prior_precision": prior}, logits_of))
        return self.select(ctx, candidates)
