"""MC Dropout in the CIFAR study: ``n_samples`` dropout masks on the penultimate features of a run
trained with that rate (one training run per rate); the rate selected on validation."""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

from pnc.core.classifier import baselines as B
from pnc.core.classifier.model import features_and_logits
from pnc.core.classifier.trained import dropout_run
from pnc.core.labels import SHARED_LABELS
from pnc.methods.ood.posthoc import Context, MethodSection, PosthocMethod, Runs


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

    def runs_of(self, config: MCDropoutSection) -> list[str]:
        return [dropout_run(r) for r in config.values("rate")]

    def candidates(self, config: MCDropoutSection, ctx: Context, runs: Runs) -> list:
        n = config.n_samples

        def build(rate):
            v = runs[dropout_run(rate)].variables

            def logits_of(x):
                f, _ = features_and_logits(v, x, ctx.config, ctx.batch_size)
                return B.dropout_logits(v, f, float(rate), n, self.key(ctx, rate, x.shape[0]))

            return logits_of

        return [({"rate": rate}, functools.partial(build, rate)) for rate in config.values("rate")]
