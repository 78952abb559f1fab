"""SWAG in the CIFAR study: ``n_samples`` weight samples from the moments the base run collected
from each start epoch, with the BN statistics refreshed on training images; the start epoch
selected on validation.

A sample is ``w = mean + sqrt(diag / 2) z_1 + D z_2 / sqrt(2 (R - 1))`` (Maddox et al., 2019) from
the moments collected during training (:mod:`pnc.core.classifier.recipe`), drawn by the CIFAR rule
of :mod:`pnc.core.swag_gaussian`; the BN statistics of every sample are recomputed on a fixed
subset of training images (the mean over batches of their batch statistics).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from pnc.core.classifier.model import Classifier, network_logits, normalize
from pnc.core.conv.resnet import BN_MOMENTUM, ResNetConfig
from pnc.core.swag_gaussian import swag_sample_split_keys
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs, SectionContext

#: Fixed label of the seeded generator that draws the BN-refresh images from a seed's training
#: split (a stream label, not a size).
SWAG_BN_STREAM = 2048


def swag_sample(moments: dict, params_template, key: jax.Array, rank: int | None = None):
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
                params = swag_sample(moments, v["params"], self.key(ctx, start, s), config.rank)
                stats = refresh_batch_stats(
                    params,
                    v["batch_stats"],
                    jnp.asarray(bn_images),
                    config=ctx.config,
                    batch_size=bn_batch,
                )
                samples.append({"params": params, "batch_stats": stats})

            def logits_of(x):
                return np.stack(
                    [network_logits(sv, x, ctx.config, ctx.batch_size) for sv in samples]
                )

            return logits_of

        return [
            ({"start_epoch": start}, functools.partial(build, start))
            for start in config.values("start_epoch")
        ]
