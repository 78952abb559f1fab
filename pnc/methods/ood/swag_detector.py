"""SWAG in the CIFAR study: ``n_samples`` weight samples from the moments the base run collected
from each start epoch, with the BN statistics refreshed on training images; the start epoch
selected on validation."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from pnc.core.classifier import baselines as B
from pnc.core.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs, SectionContext

#: Fixed label of the seeded generator that draws the BN-refresh images from a seed's training
#: split (a stream label, not a size).
SWAG_BN_STREAM = 2048


@dataclasses.dataclass(frozen=True)
class SWAGSection(MethodSection):
    """SWAG: ``n_samples`` weight samples from the moments collected from each start epoch
    (``grid``), ``rank`` deviation columns, BN statistics refreshed on ``bn_refresh`` training
    images in batches of ``bn_batch_size``."""

    grid_keys: ClassVar[tuple[str, ...]] = ("start_epoch",)
    n_samples: int = 50
    rank: int = 20
    bn_refresh: int = 2048
    bn_batch_size: int = 128


class SWAGDetector(PosthocMethod):
    """SWAG from the base run's collected moments."""

    id: ClassVar[str] = "swag"
    label: ClassVar[str] = SHARED_LABELS["swag"]
    config_cls: ClassVar[type[MethodSection]] = SWAGSection

    def study_problems(self, config: SWAGSection, study: SectionContext) -> list[str]:
        """A start epoch needs two more training epochs to collect."""
        late = [s for s in config.grid.get("start_epoch") or () if s > study.epochs - 2]
        if not late:
            return []
        return [
            f"methods.{self.id}.grid.start_epoch {late}: SWAG needs >= 2 epochs after its start,"
            f" and train.epochs = {study.epochs}"
        ]

    def candidates(self, config: SWAGSection, ctx: Context, runs: Runs) -> list:
        base = runs["base"]
        v = base.variables
        n_train = ctx.train_x.shape[0]
        rng = np.random.default_rng([ctx.seed, SWAG_BN_STREAM])
        bn_images = ctx.train_x[rng.choice(n_train, min(config.bn_refresh, n_train), replace=False)]
        bn_batch = min(config.bn_batch_size, bn_images.shape[0])

        def build(start):
            moments = base.swag.get(str(start))
            if moments is None:
                raise ValueError(f"swag: the base run collected no moments from epoch {start}")
            samples = []
            for s in range(config.n_samples):
                params = B.swag_sample(moments, v["params"], self.key(ctx, start, s), config.rank)
                stats = B.refresh_batch_stats(
                    params,
                    v["batch_stats"],
                    jnp.asarray(bn_images),
                    config=ctx.config,
                    batch_size=bn_batch,
                )
                samples.append({"params": params, "batch_stats": stats})

            def logits_of(x):
                return np.stack(
                    [B.network_logits(sv, x, ctx.config, ctx.batch_size) for sv in samples]
                )

            return logits_of

        return [
            ({"start_epoch": start}, functools.partial(build, start))
            for start in config.values("start_epoch")
        ]
