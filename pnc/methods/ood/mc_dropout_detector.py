"""MC Dropout in the CIFAR study: ``n_samples`` dropout masks on the penultimate features of a run
trained with that rate (one training run per rate); the rate selected on validation."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from pnc.core.classifier.model import features_and_logits, head
from pnc.methods.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs
from pnc.methods.ood.training_runs import RunKind


def dropout_logits(variables, feats, rate: float, n_samples: int, key: jax.Array) -> np.ndarray:
    """``[S, N, K]``: the head on features dropped with ``rate`` (inverted scaling)."""
    f = jnp.asarray(feats, jnp.float32)
    keep = jax.random.bernoulli(key, 1.0 - rate, (n_samples, *f.shape))
    return np.asarray(head(variables, jnp.where(keep, f / (1.0 - rate), 0.0)))


def _rate_problem(rate: float) -> str | None:
    return None if 0.0 < rate < 1.0 else f"dropout rate must be in (0, 1), got {rate!r}"


#: An MC Dropout run: the recipe with dropout at ``rate`` before the head (``dropout<rate>``).
DROPOUT_RUN = RunKind("dropout", float, lambda rate: {"dropout_rate": rate}, _rate_problem)


@dataclasses.dataclass(frozen=True)
class MCDropoutSection(MethodSection):
    """MC Dropout: ``n_samples`` masks per dropout rate (``grid``; one training run per rate)."""

    grid_keys: ClassVar[tuple[str, ...]] = ("rate",)
    n_samples: int = 50


class MCDropoutDetector(PosthocMethod):
    """MC Dropout on the run trained with each rate of the grid."""

    id: ClassVar[str] = "mc_dropout"
    label: ClassVar[str] = SHARED_LABELS["mc_dropout"]
    config_cls: ClassVar[type[MethodSection]] = MCDropoutSection
    run_kinds: ClassVar[tuple[RunKind, ...]] = (DROPOUT_RUN,)

    def runs_of(self, config: MCDropoutSection) -> list[str]:
        return [DROPOUT_RUN.run_id(r) for r in config.values("rate")]

    def candidates(self, config: MCDropoutSection, ctx: Context, runs: Runs) -> list:
        n = config.n_samples

        def build(rate):
            v = runs[DROPOUT_RUN.run_id(rate)].variables

            def logits_of(x):
                f, _ = features_and_logits(v, x, ctx.config, ctx.batch_size)
                return dropout_logits(v, f, float(rate), n, self.key(ctx, rate, x.shape[0]))

            return logits_of

        return [({"rate": rate}, functools.partial(build, rate)) for rate in config.values("rate")]
